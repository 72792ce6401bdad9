"""`failover --spark-checkpoint`: a Structured Streaming query that kept its position in its own
checkpoint resumes on the destination exactly, on real brokers and real Spark.

The query (`spark_checkpoint_reader`, a process of its own) reads a dc1 topic and writes each
batch's records under the batch's id; it is stopped (or killed) part-way, its checkpoint is
rewritten by the command as an operator runs it, and the same query, restarted on dc2 with the
same checkpoint, reads the rest. "Re-read" counts source records the query's output holds more
than once; "skipped" counts source records it never holds.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from dr_stream.operations.drill import drill
from dr_stream.operations.failback import failback
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.operations.readiness import FAIL, OK
from dr_stream.operations.spark_checkpoint import CHANGES, CheckpointError, move_checkpoint, undo_move
from tests.flows import flow_config, flow_file, running_flow
from tests.kafka_tools import (
    create_on_both,
    create_topic,
    delete_records_before,
    delete_topics,
    end_offsets,
    forget_prefixed,
    produce,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration

READER = "tests.positions.spark_checkpoint_reader"
PARTITIONS = 2


class Reader:
    """The application's process: started on one cluster, stopped between batches or killed."""

    def __init__(self, bootstrap: str, topic: str, checkpoint: Path, out: Path, hold: float = 0.0) -> None:
        out.mkdir(exist_ok=True)
        (out / "stop").unlink(missing_ok=True)
        self.out = out
        self.log = open(out / f"reader-{int(time.time() * 1000)}.log", "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", READER, bootstrap, topic, str(checkpoint), str(out), "--hold", str(hold)],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, cwd=Path(__file__).parents[2])

    def written(self) -> list[int]:
        path = self.out / "written"
        return [int(line) for line in path.read_text().split()] if path.exists() else []

    def wait_written(self, batches: int, timeout: float = 180) -> None:
        assert wait_until(lambda: len(self.written()) >= batches or self.process.poll() is not None, timeout), \
            "the reader wrote too few batches"
        assert self.process.poll() is None, Path(self.log.name).read_text()[-3000:]

    def stop(self) -> None:
        (self.out / "stop").touch()
        try:
            self.process.wait(timeout=120)
        finally:
            self.kill()

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)  # its group: python and the JVM it started
            self.process.wait(timeout=30)
        self.log.close()


def read_values(out: Path) -> Counter:
    """Every value in the query's output, batch by batch as its last run of each wrote it."""
    found: Counter = Counter()
    for part in out.glob("batch=*/part-*.json"):
        for line in part.read_text().splitlines():
            found[json.loads(line)["value"]] += 1
    return found


def reread_and_skipped(found: Counter, produced: list[str]) -> tuple[int, int]:
    reread = sum(n - 1 for value, n in found.items() if value in set(produced) and n > 1)
    return reread, len(set(produced) - set(found))


def failover_cli(config_file: str, checkpoint: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dr_stream.cli", "failover", "--config", config_file,
                           "--spark-checkpoint", str(checkpoint), *args], capture_output=True, text=True, timeout=300)


def newest_planned(checkpoint: Path) -> int:
    return max(int(n) for n in os.listdir(checkpoint / "offsets") if n.isdigit())


def kafka_line(checkpoint: Path, batch: int) -> dict:
    return json.loads((checkpoint / "offsets" / str(batch)).read_text().split("\n")[2])


def wait_copied(flow, topic: str, ends: dict[int, int], timeout: float = 120) -> None:
    """The flow copied and published the index of every record below `ends` (per partition)."""
    def done() -> bool:
        last = flow.feed.last_copied()
        return all(last.get((topic, p), -1) >= end - 1 for p, end in ends.items())
    assert wait_until(done, timeout, interval=1), f"{topic} not copied and indexed up to {ends}"


def source_records(prefix: str, n: int, partitions: int = PARTITIONS) -> list[dict]:
    return [{"key": f"k{i}".encode(), "value": f"{prefix}-{i}".encode(), "partition": i % partitions}
            for i in range(n)]


@pytest.fixture(scope="class")
def identical_names(spark, dc1, dc2, tmp_path_factory):
    """An active-active pair's dc1 -> dc2 direction, topics keeping their names."""
    config = flow_config(dc1, dc2, tmp_path_factory.mktemp("ckpt-aa"), name="ckpt-aa",
                         topics={"include": [r"ckpt\.aa\..*"]})
    with running_flow(spark, config) as running:
        yield running
    for cluster in (dc1, dc2):  # once the flow stopped: a topic deleted under a running flow stops its query
        forget_prefixed(cluster.bootstrap, "ckpt.aa.", "ckpt-aa-")


class TestActiveActive:
    def test_a_stopped_query_resumes_on_the_destination_across_local_records_with_the_source_gone(
            self, identical_names, dc1, dc2, tmp_path):
        flow = identical_names
        topic = unique("ckpt.aa.")
        create_on_both(dc1.bootstrap, dc2.bootstrap, topic, PARTITIONS)
        produced: list[str] = []
        for round_ in range(4):  # dc2's own writes land between the copies: offsets drift apart
            batch = source_records(f"r{round_}", 60)
            produce(dc1.bootstrap, topic, batch)
            produced += [r["value"].decode() for r in batch]
            produce(dc2.bootstrap, topic, source_records(f"dc2-local-{round_}", 14 + round_))
            wait_copied(flow, topic, {p: e for p, (_, e) in end_offsets(dc1.bootstrap, topic).items()})
        checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"

        on_dc1 = Reader(dc1.bootstrap, topic, checkpoint, out)
        on_dc1.wait_written(3)
        on_dc1.stop()
        read_on_dc1 = read_values(out)
        assert 0 < sum(read_on_dc1.values()) < len(produced), "stopped mid-stream"
        original = kafka_line(checkpoint, newest_planned(checkpoint))

        # dc1 is gone: the flow file names an address nothing answers on
        gone = flow_file(flow.config, tmp_path, source={"alias": "dc1", "bootstrap_servers": "127.0.0.1:9"},
                         topics={"include": [r"ckpt\.aa\..*"]})
        moved = failover_cli(gone, checkpoint)
        assert moved.returncode == 0, moved.stderr[-3000:]
        assert "dc1 is unreachable" in moved.stdout and "rewrote offsets/" in moved.stdout, moved.stdout
        translated = kafka_line(checkpoint, newest_planned(checkpoint))
        assert set(translated) == {topic} and translated != original, (original, translated)

        on_dc2 = Reader(dc2.bootstrap, topic, checkpoint, out)
        assert wait_until(lambda: set(produced) <= set(read_values(out)), 180), "the rest was not read on dc2"
        on_dc2.stop()

        assert reread_and_skipped(read_values(out), produced) == (0, 0)

    def test_a_query_moved_to_the_destination_fails_back_with_what_it_read_there_and_the_records_written_there(
            self, spark, identical_names, dc1, dc2, tmp_path):
        flow = identical_names
        topic = unique("ckpt.aa.back.")
        create_on_both(dc1.bootstrap, dc2.bootstrap, topic, PARTITIONS)
        originals = source_records("dc1", 200)
        produce(dc1.bootstrap, topic, originals)
        wait_copied(flow, topic, {p: 100 for p in range(PARTITIONS)})
        checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
        on_dc1 = Reader(dc1.bootstrap, topic, checkpoint, out)
        on_dc1.wait_written(2)
        on_dc1.stop()
        config_file = flow_file(flow.config, tmp_path, topics={"include": [r"ckpt\.aa\..*"]})
        moved = failover_cli(config_file, checkpoint)
        assert moved.returncode == 0, moved.stderr[-3000:]

        # dc1 is out: producers write to dc2, the query reads there and stops again part-way
        outage = source_records("outage", 60)
        produce(dc2.bootstrap, topic, outage)
        on_dc2 = Reader(dc2.bootstrap, topic, checkpoint, out)
        on_dc2.wait_written(len(on_dc2.written()) + 2)
        on_dc2.stop()
        produced = [r["value"].decode() for r in originals + outage]
        assert len(set(read_values(out)) & set(produced)) < len(produced), "stopped before the end"

        back = flow_config(dc2, dc1, tmp_path / "back", name="ckpt-aa-back", topics={"include": [r"ckpt\.aa\..*"]})
        report = failback(back, spark, "ckpt-no-group-.*", spark_checkpoints=[str(checkpoint)],
                          log=lambda line: None)
        assert not report.checkpoints_refused and len(report.checkpoints) == 1
        assert {p.method for ps in report.checkpoints[0].positions.values() for p in ps} <= {"exact", "next",
                                                                                           "returned"}
        assert not report.checkpoints[0].inexact
        on_back = Reader(dc1.bootstrap, topic, checkpoint, out)
        assert wait_until(lambda: set(produced) <= set(read_values(out)), 180), "the rest was not read on dc1"
        on_back.stop()
        assert reread_and_skipped(read_values(out), produced) == (0, 0)

    def test_what_is_not_a_checkpoint_of_this_flows_source_is_refused_in_one_line_and_nothing_is_written(
            self, spark, identical_names, dc1, tmp_path):
        flow = identical_names
        topic = unique("ckpt.aa.refused.")
        create_topic(dc1.bootstrap, topic, 1)
        produce(dc1.bootstrap, topic, source_records("x", 10, partitions=1))
        meta = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'
        cases = {
            "rate": ("7", "names no Kafka source's offsets"),
            "beyond": (json.dumps({topic: {"0": 5000}}), f"{topic}[0]: offset 5000 is beyond the source's log end 10"),
            "not-copied": (json.dumps({"orders": {"0": 1}}), "topic 'orders' is not one this flow copies"),
            "malformed": ('{"' + topic + '":{"0":', "source 0's offset is not JSON"),
        }
        tables = FlowTables.of(flow.config, lambda: spark)
        for name, (line, says) in cases.items():
            checkpoint = tmp_path / name
            (checkpoint / "offsets").mkdir(parents=True)
            (checkpoint / "metadata").write_text('{"id":"x"}')
            (checkpoint / "offsets" / "0").write_text(f"v1\n{meta}\n{line}")
            before = sorted((p.relative_to(checkpoint), p.read_bytes()) for p in checkpoint.rglob("*") if p.is_file())
            with pytest.raises(CheckpointError, match=re.escape(says)) as refused:
                move_checkpoint(flow.config, tables, spark, str(checkpoint), log=lambda line: None)
            assert "\n" not in str(refused.value)
            after = sorted((p.relative_to(checkpoint), p.read_bytes()) for p in checkpoint.rglob("*") if p.is_file())
            assert after == before, name
        with pytest.raises(CheckpointError, match="not a Spark Structured Streaming checkpoint"):
            move_checkpoint(flow.config, tables, spark, str(tmp_path / "nothing-here"), log=lambda line: None)
        with pytest.raises(CheckpointError, match="this flow's own checkpoint"):
            move_checkpoint(flow.config, tables, spark, flow.config.streaming.checkpoint_dir, log=lambda line: None)

        # through the command line: exit 64, one line on stderr
        config_file = flow_file(flow.config, tmp_path, topics={"include": [r"ckpt\.aa\..*"]})
        done = failover_cli(config_file, tmp_path / "beyond")
        assert done.returncode == 64 and done.stdout == "", done.stderr[-2000:]
        assert [line for line in done.stderr.splitlines() if line.startswith("dr-stream")] == [
            f"dr-stream: failover: {tmp_path / 'beyond'}: offsets/0 source 0: {topic}[0]: offset 5000 is beyond the "
            "source's log end 10: these offsets are not from this flow's source"]


@pytest.fixture(scope="class")
def renamed_topic(spark, dc1, dc2, tmp_path_factory):
    """dc1 -> dc2 renaming `t` to `dc1.t`, started after retention removed the start of `t`: the
    copies begin at 0, the source at 50 (each partition)."""
    topic = unique("ckpt.ren.")
    create_topic(dc1.bootstrap, topic, PARTITIONS)
    produce(dc1.bootstrap, topic, source_records("s", 400))
    for p in range(PARTITIONS):
        delete_records_before(dc1.bootstrap, topic, p, 50)
    config = flow_config(dc1, dc2, tmp_path_factory.mktemp("ckpt-ren"), name="ckpt-ren",
                         topics={"include": [r"ckpt\.ren\..*"], "rename": "dc1.${topic}"})
    try:
        with running_flow(spark, config) as running:
            yield running, topic
    finally:
        delete_topics(dc1.bootstrap, [topic])
        delete_topics(dc2.bootstrap, [f"dc1.{topic}"])


class TestRenamedTopic:
    def test_a_query_killed_in_a_batch_runs_it_again_on_the_destination_over_the_same_records(
            self, spark, renamed_topic, dc1, dc2, tmp_path):
        flow, topic = renamed_topic
        produced = [f"s-{i}" for i in range(100, 400)]  # what retention left: 50.. of each partition
        wait_copied(flow, topic, {p: 200 for p in range(PARTITIONS)})
        checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"

        on_dc1 = Reader(dc1.bootstrap, topic, checkpoint, out, hold=4)
        on_dc1.wait_written(3)
        on_dc1.kill()  # -9, in the sleep after its sink wrote the batch, before Spark commits it
        planned = newest_planned(checkpoint)
        assert not (checkpoint / "commits" / str(planned)).exists(), "the newest batch was committed"
        originals = {b: (checkpoint / "offsets" / str(b)).read_text() for b in (planned - 1, planned)}

        # the drill says which listed checkpoints would move exactly, changing nothing
        listed = replace(flow.config, drill=replace(flow.config.drill,
                                                    spark_checkpoints=(str(checkpoint), str(tmp_path / "none"))))
        verdict = drill(listed, FlowTables.of(listed, lambda: spark), log=lambda line: None)
        found = {c.subject.rsplit(" ", 1)[-1]: (c.state, c.detail) for c in verdict.checks
                 if "spark checkpoint" in c.subject}
        assert found[str(checkpoint)] == (OK, "every Kafka offset would move exactly"), found
        assert found[str(tmp_path / "none")][0] == FAIL and "not a Spark Structured Streaming checkpoint" in \
            found[str(tmp_path / "none")][1]
        assert {b: (checkpoint / "offsets" / str(b)).read_text() for b in originals} == originals

        config_file = flow_file(flow.config, tmp_path, topics={"include": [r"ckpt\.ren\..*"], "rename": "dc1.${topic}"})
        dry = failover_cli(config_file, checkpoint, "--dry-run")
        assert dry.returncode == 0 and "would rewrite" in dry.stdout, dry.stderr[-3000:]
        assert {b: (checkpoint / "offsets" / str(b)).read_text() for b in originals} == originals
        moved = failover_cli(config_file, checkpoint, "--json")
        assert moved.returncode == 0, moved.stderr[-3000:]
        report = json.loads(moved.stdout)
        assert report["batches"] == [planned - 1, planned] and report["committed"] == planned - 1
        assert {p["method"] for p in report["positions"]} <= {"exact", "next"}
        for batch in originals:
            source, rewritten = json.loads(originals[batch].split("\n")[2]), kafka_line(checkpoint, batch)
            # retention removed 50 records of each partition before the copy began
            assert rewritten == {f"dc1.{topic}": {p: o - 50 for p, o in source[topic].items()}}
        kept = Path(report["change"].removeprefix("file:"))
        assert kept.parent.name == CHANGES
        assert {b: (kept / "offsets" / str(b)).read_text() for b in originals} == originals

        # run again by mistake: its offsets are dc2's now, not the source's
        again = failover_cli(config_file, checkpoint)
        assert again.returncode == 64 and "since dr-stream moved them there" in again.stderr, again.stderr[-2000:]

        # undone, the originals are back; moved again, the same texts as the first time
        moved_texts = {b: (checkpoint / "offsets" / str(b)).read_text() for b in originals}
        undo_move(spark, str(checkpoint))
        assert {b: (checkpoint / "offsets" / str(b)).read_text() for b in originals} == originals
        move_checkpoint(flow.config, FlowTables.of(flow.config, lambda: spark), spark, str(checkpoint),
                        log=lambda line: None)
        assert {b: (checkpoint / "offsets" / str(b)).read_text() for b in originals} == moved_texts

        on_dc2 = Reader(dc2.bootstrap, f"dc1.{topic}", checkpoint, out)
        assert wait_until(lambda: set(produced) <= set(read_values(out)), 180), "the rest was not read on dc2"
        on_dc2.stop()
        assert reread_and_skipped(read_values(out), produced) == (0, 0)
        with pytest.raises(CheckpointError, match=f"the query ran batch {newest_planned(checkpoint)} on dc2 since"):
            undo_move(spark, str(checkpoint))
