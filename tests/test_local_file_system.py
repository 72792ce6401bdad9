"""Local state (checkpoints, Delta tables on local disk) is written without starting a process:
Hadoop's own local file system runs `chmod` and `readlink` per file when its native library is
absent, as it is with pyspark, and a SIGTERM to the flow's process group ends those children and
fails the write (io.drstream.hadoop.NioRawLocalFileSystem)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pyspark
import pytest

from dr_stream.runtime.jvm import local_file_system_jar
from dr_stream.runtime.session import LOCAL_FILE_SYSTEM

# Each test starts a JVM (a probe program or Spark).
pytestmark = pytest.mark.integration

PROBE = Path(__file__).resolve().parent / "jvm_probes" / "LocalStateWrites.java"
HADOOP_OWN = ("org.apache.hadoop.fs.LocalFileSystem", "org.apache.hadoop.fs.local.LocalFs")
OURS = (LOCAL_FILE_SYSTEM["spark.hadoop.fs.file.impl"],
        LOCAL_FILE_SYSTEM["spark.hadoop.fs.AbstractFileSystem.file.impl"])


def _write_state(tmp_path: Path, classes: tuple[str, str]) -> subprocess.CompletedProcess:
    """The probe in a JVM whose PATH has no `chmod` or `readlink`: a write that needs a process fails."""
    state = tmp_path / classes[0].rsplit(".", 1)[-1]
    state.mkdir()
    classpath = f"{local_file_system_jar()}:{Path(pyspark.__file__).parent / 'jars'}/*"
    java = shutil.which("java")
    assert java is not None
    env = {**os.environ, "PATH": str(tmp_path / "no-tools")}
    return subprocess.run([java, "-cp", classpath, str(PROBE), str(state), *classes], env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def probe_runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    tmp_path = tmp_path_factory.mktemp("local-fs")
    return {"ours": _write_state(tmp_path, OURS), "hadoop": _write_state(tmp_path, HADOOP_OWN)}


def test_checkpoint_and_table_writes_start_no_process_and_get_the_modes_hadoop_sets(probe_runs):
    run = probe_runs["ours"]
    assert run.returncode == 0, run.stderr[-2000:]
    modes = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert modes == {
        "raw": "io.drstream.hadoop.NioRawLocalFileSystem",
        "offsets": "rwxr-xr-x",
        "offsets/0": "rw-r--r--",
        "offsets/.0.crc": "rw-r--r--",
        "table": "rwxr-xr-x",
        "table/part-0.parquet": "rw-r-----",
    }


def test_hadoops_own_local_file_system_needs_a_process_for_the_same_writes(probe_runs):
    # Without this, the probe's PATH would prove nothing.
    run = probe_runs["hadoop"]
    assert run.returncode != 0
    assert 'Cannot run program "chmod"' in run.stderr


def test_the_flow_session_writes_local_state_through_it(spark):
    conf = spark._jsc.hadoopConfiguration()
    jvm = spark._jvm
    local = jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf)
    context = jvm.org.apache.hadoop.fs.FileContext.getLocalFSFileContext(conf)
    assert local.getRaw().getClass().getName() == "io.drstream.hadoop.NioRawLocalFileSystem"
    assert context.getDefaultFileSystem().getClass().getName() == OURS[1]
