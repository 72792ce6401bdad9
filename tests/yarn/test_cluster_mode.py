"""Flows on a real YARN with their state on a real HDFS, submitted with `./spark-submit.sh`.

One HDFS + YARN (Hadoop's mini-cluster, `dr-stream dev yarn`) serves the module; each test
submits its own application and kills it through the ResourceManager when done. The figures
docs/deploying.md and the closing note quote (submit to first record, kill to records flowing again)
are printed by these tests (`pytest -s -m yarn`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dr_stream.dev.hadoop import LocalHadoop
from dr_stream.runtime.paths import project_root
from tests.kafka_tools import (
    assert_copied_exactly_once,
    consume_and_commit,
    count,
    create_topic,
    produce,
    topic_exists,
    unique,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.yarn]
# Small containers: the node offers 6 GiB, one application takes two (driver and one executor).
SMALL = ["--driver-memory", "1g", "--executor-memory", "1g", "--num-executors", "1"]


@pytest.fixture(scope="module")
def hadoop(cluster_home) -> Iterator[LocalHadoop]:
    cluster = LocalHadoop(cluster_home / "hadoop", 20800)
    began = time.monotonic()
    cluster.start()
    print(f"\nHDFS + YARN ready in {time.monotonic() - began:.1f}s")
    try:
        yield cluster
    finally:
        for app in cluster.applications():
            if app["state"] not in ("FINISHED", "FAILED", "KILLED"):
                cluster.kill_application(app["id"])
        cluster.stop()


def _flow(path: Path, dc1, dc2, topic: str, state: str, **streaming) -> Path:
    path.write_text(yaml.safe_dump({
        "name": path.stem,
        "source": {"alias": "dc1", "bootstrap_servers": dc1.bootstrap},
        "destination": {"alias": "dc2", "bootstrap_servers": dc2.bootstrap},
        "topics": {"include": [re.escape(topic)]},
        "streaming": {"checkpoint_dir": f"{state}/checkpoints", "offset_index": f"{state}/offset-index",
                      "trigger": "500ms", **streaming},
    }))
    return path


def _source_topic(dc1, topics: list[str], prefix: str, partitions: int, total: int, repeat: int = 1) -> str:
    """A new topic on dc1 holding `total` numbered records (8 bytes times `repeat`), round robin."""
    topic = unique(prefix)
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, partitions)
    produce(dc1.bootstrap, topic,
            ({"value": f"{i:08d}".encode() * repeat, "partition": i % partitions} for i in range(total)))
    return topic


def _environment(hadoop: LocalHadoop) -> dict[str, str]:
    return {**os.environ, "HADOOP_CONF_DIR": str(hadoop.conf_dir)}


def _submit_cluster_mode(hadoop: LocalHadoop, flow: Path, log: Path) -> str:
    """Submits and returns at once (the application runs on); its application id."""
    done = subprocess.run(
        [str(project_root() / "spark-submit.sh"), str(flow), "--master", "yarn", "--deploy-mode", "cluster",
         "--conf", "spark.yarn.submit.waitAppCompletion=false", *SMALL],
        env=_environment(hadoop), cwd=project_root(), capture_output=True, text=True, timeout=300)
    log.write_text(done.stdout + done.stderr)
    found = re.search(r"application_\d+_\d+", done.stderr)
    assert done.returncode == 0 and found, log.read_text()[-3000:]
    return found.group(0)


def _driver_output(hadoop: LocalHadoop, app_id: str) -> str:
    """The drivers' stdout, every attempt, for failure messages."""
    return "\n".join(p.read_text(errors="replace")[-2000:]
                     for p in sorted(hadoop.home.glob(f"work/**/{app_id}/container_*_000001/stdout")))


def _cli(hadoop: LocalHadoop, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(project_root() / ".venv" / "bin" / "dr-stream"), *args], env=_environment(hadoop),
                          capture_output=True, text=True, timeout=300)


def test_yarn_cluster_mode_survives_a_killed_driver_container_copies_exactly_once_and_the_cli_reads_its_state(
        hadoop, dc1, dc2, topics, tmp_path):
    """One cluster-mode submission covers what two used to check apart: the copy, YARN's restart of
    a killed driver (a lost node), exactly once across it, and the CLI reading the state on HDFS."""
    total = 60_000
    topic = _source_topic(dc1, topics, "yarn.cluster.", 3, total, repeat=8)
    group = unique("yarn-group-")
    consume_and_commit(dc1.bootstrap, topic, group, {p: 1000 for p in range(3)}, helper=False)
    # Small batches keep the copy going long enough to be interrupted.
    flow = _flow(tmp_path / "yarn-cluster.yaml", dc1, dc2, topic, f"{hadoop.fs_uri}/dr-stream/yarn-cluster",
                 trigger="200ms", max_records_per_batch=1500)
    # The destination's address reaches the driver on YARN only if spark-submit.sh hands it over.
    flow.write_text(flow.read_text().replace(dc2.bootstrap, "${env:DR_TEST_YARN_DESTINATION}"))
    os.environ["DR_TEST_YARN_DESTINATION"] = dc2.bootstrap

    began = time.monotonic()
    app = _submit_cluster_mode(hadoop, flow, tmp_path / "submit.log")
    try:
        assert wait_until(lambda: topic_exists(dc2.bootstrap, topic) and count(dc2.bootstrap, topic) > 0, 240), \
            _driver_output(hadoop, app)
        print(f"\nyarn-cluster: submit to first copied record {time.monotonic() - began:.1f}s")
        assert wait_until(lambda: count(dc2.bootstrap, topic) >= 6000, 120), _driver_output(hadoop, app)
        first = hadoop.attempts(app)[-1]["containerId"]
        hadoop.kill_container(first)
        killed_at, at_kill = time.monotonic(), count(dc2.bootstrap, topic)
        assert at_kill < total, "the copy finished before the kill; the test proves nothing"
        assert wait_until(lambda: len(hadoop.attempts(app)) == 2, 120), hadoop.application(app)
        # Records the first attempt's executor still had in flight may land after the kill;
        # the second attempt is copying once the count moves past them.
        settled = count(dc2.bootstrap, topic)
        assert wait_until(lambda: count(dc2.bootstrap, topic) > settled, 240), _driver_output(hadoop, app)
        print(f"yarn restart: kill -9 of {first} to records flowing again {time.monotonic() - killed_at:.1f}s "
              f"({at_kill} of {total} copied at the kill)")
        assert wait_until(lambda: count(dc2.bootstrap, topic) >= total, 240), _driver_output(hadoop, app)
        time.sleep(3)  # anything duplicated would land now
        assert_copied_exactly_once(dc2.bootstrap, topic, total)

        def translated() -> dict[int, int]:
            done = _cli(hadoop, "translate", "--config", str(flow), "--group", group, "--json")
            assert done.returncode == 0, done.stderr[-2000:]
            return {p["partition"]: p["offset"] for p in json.loads(done.stdout)["positions"]}

        assert wait_until(lambda: translated() == {0: 1000, 1: 1000, 2: 1000}, 120, interval=2), translated()

        def status() -> subprocess.CompletedProcess:
            return _cli(hadoop, "status", "--config", str(flow), "--json", "--max-lag-records", "0")

        assert wait_until(lambda: status().returncode == 0, 60, interval=2), (
            status().stdout + _driver_output(hadoop, app))
        lags = json.loads(status().stdout)["replication"]
        assert {(lag["partition"], lag["lag_records"]) for lag in lags} == {(0, 0), (1, 0), (2, 0)}
        assert hadoop.application(app)["state"] == "RUNNING"
    finally:
        hadoop.kill_application(app)


def test_reset_flow_moves_state_on_hdfs_aside_and_a_fresh_run_starts_clean(hadoop, spark, dc1, dc2, topics, tmp_path):
    from dr_stream.core.config import load_flow
    from tests.flows import running_flow

    topic = _source_topic(dc1, topics, "yarn.reset.", 2, 2000)
    state = f"{hadoop.fs_uri}/dr-stream/yarn-reset"
    flow_path = _flow(tmp_path / "yarn-reset.yaml", dc1, dc2, topic, state)
    config = load_flow(flow_path)
    with running_flow(spark, config):
        assert wait_until(lambda: topic_exists(dc2.bootstrap, topic) and count(dc2.bootstrap, topic) >= 2000, 120)

    fs = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(state).getFileSystem(
        spark.sparkContext._jsc.hadoopConfiguration())

    def exists(uri: str) -> bool:
        return fs.exists(spark.sparkContext._jvm.org.apache.hadoop.fs.Path(uri))

    assert exists(f"{state}/checkpoints") and exists(f"{state}/offset-index")
    done = _cli(hadoop, "reset-flow", "--config", str(flow_path))
    assert done.returncode == 0, done.stderr[-2000:]
    moved = re.findall(r"moved (\S+) -> (\S+)", done.stdout)
    # No group committed on the source, so no translations table was ever written.
    assert {m[0] for m in moved} == {f"{state}/checkpoints", f"{state}/offset-index"}
    assert all(not exists(old) and exists(new) for old, new in moved), done.stdout

    produce(dc1.bootstrap, topic, ({"value": b"w", "partition": i % 2} for i in range(500)))
    with running_flow(spark, config):
        assert wait_until(lambda: count(dc2.bootstrap, topic) >= 2500, 120)
        time.sleep(2)
    assert_copied_exactly_once(dc2.bootstrap, topic, 2500)
    assert exists(f"{state}/checkpoints/replicate/offsets/0"), "the fresh run did not start from batch 0"


def test_yarn_client_mode_replicates(hadoop, dc1, dc2, topics, tmp_path):
    topic = _source_topic(dc1, topics, "yarn.client.", 2, 5000)
    flow = _flow(tmp_path / "yarn-client.yaml", dc1, dc2, topic, f"{hadoop.fs_uri}/dr-stream/yarn-client")
    log = tmp_path / "client.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(project_root() / "spark-submit.sh"), str(flow), "--master", "yarn", "--deploy-mode", "client", *SMALL],
            env=_environment(hadoop), cwd=project_root(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        assert wait_until(lambda: topic_exists(dc2.bootstrap, topic) and count(dc2.bootstrap, topic) >= 5000, 240), \
            log.read_text()[-3000:]
        running = [a for a in hadoop.applications() if a["name"] == "dr-stream-yarn-client" and a["state"] == "RUNNING"]
        assert running, "the executors did not run on YARN"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    assert_copied_exactly_once(dc2.bootstrap, topic, 5000)


def test_a_relative_state_path_in_cluster_mode_is_one_clear_line(tmp_path):
    flow = tmp_path / "relative.yaml"
    flow.write_text(yaml.safe_dump({
        "source": {"alias": "dc1", "bootstrap_servers": "127.0.0.1:1"},
        "destination": {"alias": "dc2", "bootstrap_servers": "127.0.0.1:2"},
        "streaming": {"checkpoint_dir": "hdfs://nn:8020/x/checkpoints", "offset_index": "state/offset-index"},
    }))
    done = subprocess.run([str(project_root() / "spark-submit.sh"), str(flow), "--master", "yarn",
                           "--deploy-mode", "cluster"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 78  # ExitCode.CONFIG
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"{flow}: streaming.offset_index: 'state/offset-index' is a relative path" in lines[0]
    assert "cluster deploy mode" in lines[0]


def test_dev_yarn_status_tells_where_the_client_configuration_is_and_what_runs(hadoop, capsys):
    from dr_stream.dev.hadoop_commands import yarn_command

    assert yarn_command("status", hadoop) == 0
    shown = capsys.readouterr().out
    assert f"hdfs\t{hadoop.fs_uri}\trunning (pid {hadoop.pid()})" in shown
    assert f"export HADOOP_CONF_DIR={hadoop.conf_dir}" in shown
    assert (hadoop.conf_dir / "yarn-site.xml").exists() and (hadoop.conf_dir / "core-site.xml").exists()


def test_a_translation_log_on_hdfs_is_compacted_through_spark_to_one_row_per_position(hadoop, spark):
    """delta-rs has no HDFS client: the log is appended to and compacted through Spark there."""
    from dr_stream.positions.translation_log import TranslationLog
    from dr_stream.runtime.delta_reads import DeltaReads
    from tests.positions.test_translation_log import gone, row

    log = TranslationLog(f"{hadoop.fs_uri}/dr-stream/{unique('translations-')}", DeltaReads(lambda: spark),
                         spark=spark)
    for round_ in range(5):
        log.append([row(group, 0, round_ * 10, 100 + round_) for group in range(3)])
    log.append([gone(3, 0, 100), gone(2, 0, 200)])  # group 2 gone from the source
    before = log.latest()
    assert [r["group"] for r in before] == ["g0", "g1"]

    done = log.compact()

    assert done is not None and (done.rows_before, done.rows_after) == (17, 2)
    log.reads = DeltaReads(lambda: spark)
    assert log.latest() == before


def test_an_offset_index_on_hdfs_is_kept_through_spark_by_the_same_rule(hadoop, spark):
    """delta-rs has no HDFS client: the index's upkeep (`kept_runs`) runs through Spark there."""
    from dr_stream.index.index_table import OffsetIndex
    from dr_stream.index.run_store import Run

    index = OffsetIndex(spark, f"{hadoop.fs_uri}/dr-stream/{unique('offset-index-')}")
    index.append_runs([(Run("c1", "t", 0, "t", 0, start, start + 9, start, start + 9), None)
                       for start in (0, 10, 20)])

    done = index.keep({("t", 0): 10})

    assert done is not None and (done.rows_before, done.rows_after) == (3, 1)
    assert [(r.origin_start, r.origin_end) for r in index.runs().collect()] == [(10, 29)]


def test_a_spark_checkpoint_on_hdfs_is_moved_to_the_destination_and_undone_through_hadoops_file_system(
        hadoop, spark, dc1, dc2, topics, tmp_path):
    from dr_stream.core.config import load_flow
    from dr_stream.operations.flow_tables import FlowTables
    from dr_stream.operations.spark_checkpoint import CHANGES, move_checkpoint, undo_move
    from dr_stream.runtime.state_paths import read_text
    from tests.flows import running_flow

    topic = _source_topic(dc1, topics, "yarn.ckpt.", 2, 400)
    state = f"{hadoop.fs_uri}/dr-stream/{unique('yarn-ckpt-')}"
    config = load_flow(_flow(tmp_path / "yarn-ckpt.yaml", dc1, dc2, topic, state))
    # dc2 holds 30 records of its own in each partition first: the copies sit 30 later there
    create_topic(dc2.bootstrap, topic, 2)
    produce(dc2.bootstrap, topic, ({"value": b"dc2", "partition": i % 2} for i in range(60)))
    checkpoint = f"{hadoop.fs_uri}/apps/{unique('query-')}"
    query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", dc1.bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 150)
             .load().writeStream.format("noop").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120) and query.exception() is None
    newest = read_text(spark, f"{checkpoint}/offsets/2")
    assert newest is not None and newest.split("\n")[2] == json.dumps({topic: {"0": 200, "1": 200}},
                                                                       separators=(",", ":"))
    with running_flow(spark, config) as flow:
        assert wait_until(lambda: all(flow.feed.last_copied().get((topic, p), -1) >= 199 for p in (0, 1)), 120)

        move = move_checkpoint(config, FlowTables.of(config, lambda: spark), spark, checkpoint, log=lambda line: None)

    assert move.batches == [1, 2] and move.committed == 2 and not move.inexact
    moved = read_text(spark, f"{checkpoint}/offsets/2")
    assert moved is not None and moved.split("\n")[2] == json.dumps({topic: {"0": 230, "1": 230}},
                                                                     separators=(",", ":"))
    assert move.change is not None and move.change.startswith(f"{checkpoint}/{CHANGES}/")
    assert read_text(spark, f"{move.change}/offsets/2") == newest
    undo_move(spark, checkpoint)
    assert read_text(spark, f"{checkpoint}/offsets/2") == newest
