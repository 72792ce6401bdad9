"""An upgrade in place: a flow run by the previous release, its code taken from git history, is
stopped with its state on disk and started again by this code, which copies every record once and
translates groups across the upgrade; a state of a newer format than this code reads is refused in
one line. `make test-upgrade` runs it (about 2 minutes; not part of `make test`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from dr_stream import __version__
from dr_stream.core.config import load_flow
from dr_stream.core.provenance import newest_entry
from dr_stream.operations.failover import failover
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.runtime.delta_appends import DeltaAppends
from dr_stream.runtime.paths import cache_dir, project_root
from dr_stream.runtime.state_releases import schema
from tests.kafka_tools import (
    committed,
    consume_all,
    consume_and_commit,
    count,
    count_once_created,
    create_topic,
    end_offsets,
    forget_prefixed,
    produce,
    read_range,
    unique,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.upgrade]

# The release before this one: its version, and the commit of main it was cut from.
PREVIOUS = ("0.1.0", "1c5e522301609aec5bf6fca6d2c24b5d5e8971e8")
PARTITIONS = 3
PER_PARTITION = 1_000  # records per partition in each of the three rounds


@dataclass(frozen=True)
class Checkout:
    """A release's code and what its commands run with: this checkout's Python environment, its own
    JVM jars, every other jar set shared with this checkout's cache (the pins are the same)."""

    root: Path
    env: dict[str, str]

    def start(self, flow: Path, log: Path) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            return subprocess.Popen([sys.executable, "-m", "dr_stream.cli", "run", "--config", str(flow)],
                                    cwd=self.root, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)


def stop(proc: subprocess.Popen[bytes], timeout: float = 120) -> int:
    """SIGTERM, as an operator stops a flow for an upgrade; the process group killed if it hangs."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    return proc.returncode


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory) -> Checkout:
    version, commit = PREVIOUS
    root = project_root()
    found = subprocess.run(["git", "-C", str(root), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    if found.returncode != 0:
        pytest.fail(f"release {version} is commit {commit} of main, which this checkout does not hold: the upgrade "
                    "test needs main's history (a clone without --depth)")
    tree = tmp_path_factory.mktemp(f"dr-stream-{version}")
    archive = subprocess.run(["git", "-C", str(root), "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    cache = tree / ".cache"
    (cache / "jars").mkdir(parents=True)
    for jars in (cache_dir() / "jars").iterdir():
        if not jars.name.startswith("dr-stream"):  # its own jars are built from its own sources
            (cache / "jars" / jars.name).symlink_to(jars)
    env = {**os.environ, "PYTHONPATH": str(tree), "DR_STREAM_HOME": str(tree), "DR_STREAM_CACHE": str(cache)}
    subprocess.run([sys.executable, "-m", "dr_stream.runtime.jvm"], cwd=tree, env=env, check=True,
                   capture_output=True)
    said = subprocess.run([sys.executable, "-c", "import dr_stream; print(dr_stream.__version__, dr_stream.__file__)"],
                          cwd=tree, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert said == [version, str(tree / "dr_stream" / "__init__.py")], said
    return Checkout(tree, env)


def current() -> Checkout:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DR_STREAM_HOME")}
    return Checkout(project_root(), env)


def flow_file(directory: Path, dc1, dc2, topic: str, groups: str) -> Path:
    path = directory / "flow.yaml"
    path.write_text(yaml.safe_dump({
        "name": "upgrade-dc1-to-dc2",
        "source": {"alias": "dc1", "bootstrap_servers": dc1.bootstrap},
        "destination": {"alias": "dc2", "bootstrap_servers": dc2.bootstrap},
        "topics": {"include": [topic.replace(".", "\\.")]},
        "offsets": {"groups": {"include": [groups]}},
        "streaming": {"checkpoint_dir": str(directory / "checkpoints"), "offset_index": str(directory / "index"),
                      "translations": str(directory / "translations"), "trigger": "500ms"},
    }))
    return path


def records(round_: int):
    first = round_ * PER_PARTITION
    return ({"key": f"k{i}".encode(), "value": f"{p}:{i}".encode(), "partition": p}
            for i in range(first, first + PER_PARTITION) for p in range(PARTITIONS))


def origins(copies) -> list[tuple[int, int]]:
    """(partition, origin offset) of each copy, from its provenance header."""
    out = []
    for r in copies:
        entry = newest_entry(r.headers, "__replicator_id")
        assert entry is not None, f"a copy without provenance at {r.partition}:{r.offset}"
        out.append((entry["partition"], entry["offset"]))
    return out


def test_a_flow_the_previous_release_ran_resumes_on_this_one_exactly_once_with_groups_translated(
        previous_release, dc1, dc2, tmp_path):
    topic, group = unique("upgrade."), unique("upg-")
    remote = topic
    create_topic(dc1.bootstrap, topic, partitions=PARTITIONS)
    flow = flow_file(tmp_path, dc1, dc2, topic, group.replace("-", "\\-") + ".*")
    old_log, new_log = tmp_path / "previous.log", tmp_path / "current.log"
    produce(dc1.bootstrap, topic, records(0))
    running: list[subprocess.Popen[bytes]] = []
    try:
        old = previous_release.start(flow, old_log)
        running.append(old)
        assert wait_until(lambda: count_once_created(dc2.bootstrap, remote) >= PER_PARTITION * PARTITIONS, 240, 1), (
            f"release {PREVIOUS[0]} copied nothing; see {old_log}")
        consume_and_commit(dc1.bootstrap, topic, group, dict.fromkeys(range(PARTITIONS), 500), helper=False)
        assert wait_until(lambda: len(committed(dc2.bootstrap, group, remote, PARTITIONS)) == PARTITIONS, 120, 1), (
            f"release {PREVIOUS[0]} did not sync {group}; see {old_log}")
        produce(dc1.bootstrap, topic, records(1))
        time.sleep(1)  # stopped in the middle of the second round, as an upgrade finds a flow
        assert stop(old) == 0, f"release {PREVIOUS[0]} did not stop cleanly; see {old_log}"
        copied_before = count(dc2.bootstrap, remote)
        produce(dc1.bootstrap, topic, records(2))

        new = current().start(flow, new_log)
        running.append(new)
        total = 3 * PER_PARTITION
        assert wait_until(lambda: count_once_created(dc2.bootstrap, remote) >= total * PARTITIONS, 240, 1), (
            f"this release did not copy what followed; see {new_log}")
        consume_and_commit(dc1.bootstrap, topic, group, dict.fromkeys(range(PARTITIONS), 2_500), helper=False)
        moved_on = copy_offsets(dc2, remote, 2_500)
        assert wait_until(lambda: committed(dc2.bootstrap, group, remote, PARTITIONS) == moved_on, 120, 1), (
            f"{group} not moved across the upgrade; see {new_log}")
        time.sleep(2)  # long enough for a second copy of anything to have landed
        assert stop(new) == 0, f"this release did not stop cleanly; see {new_log}"
    finally:
        for proc in running:
            stop(proc)

    # every record once, across the two releases
    copies = origins(consume_all(dc2.bootstrap, remote))
    assert sorted(copies) == [(p, o) for p in range(PARTITIONS) for o in range(total)]
    assert copied_before < total * PARTITIONS  # the stop came before everything was copied
    log = new_log.read_text()
    assert f"is written by dr-stream {__version__}" in log, log[-3000:]

    # a group committed among the previous release's copies fails over exactly with this one
    config = load_flow(str(flow))
    other = f"{group}-f"
    consume_and_commit(dc1.bootstrap, topic, other, dict.fromkeys(range(PARTITIONS), 700), helper=False)
    moved = failover(config, FlowTables.of(config), other)
    assert {r.translation.method for r in moved.rows} == {"exact"}, moved.rows
    resumed = origins(read_range(dc2.bootstrap, remote, committed(dc2.bootstrap, other, remote, PARTITIONS),
                                 end_offsets(dc2.bootstrap, remote)))
    assert sorted(resumed) == [(p, o) for p in range(PARTITIONS) for o in range(700, total)]

    # a state a newer format wrote is refused in one line, before anything is read or written
    DeltaAppends(log=pytest.fail).append(config.releases_record, schema(), [(99, "9.0.0", int(time.time() * 1000))],
                                         lambda: pytest.fail("through Spark"))
    refused = subprocess.run([sys.executable, "-m", "dr_stream.cli", "run", "--config", str(flow)],
                             cwd=project_root(), env=current().env, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 78, refused.stderr[-2000:]
    lines = [line for line in refused.stderr.splitlines() if "state format 99" in line]
    assert len(lines) == 1 and "written by dr-stream 9.0.0" in lines[0], refused.stderr[-2000:]
    forget_prefixed(dc1.bootstrap, topic, group)
    forget_prefixed(dc2.bootstrap, topic, group)


def copy_offsets(dc2, topic: str, origin: int) -> dict[int, int]:
    """Per partition, the destination offset of the copy of origin offset `origin`."""
    return {p: o for r in consume_all(dc2.bootstrap, topic)
            if (entry := newest_entry(r.headers, "__replicator_id")) and entry["offset"] == origin
            for p, o in [(entry["partition"], r.offset)]}
