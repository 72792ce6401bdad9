"""Records the source deleted before a stopped flow read them are recorded, exactly, when it
starts again: in the ledger, on /metrics, by `dr-stream losses` and by `dr-stream drill`
(real brokers, real Spark)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from dr_stream.replication.losses import LossLedger
from tests.flows import flow_config, flow_file, running_flow
from tests.kafka_tools import (
    admin,
    committed,
    consume_all,
    consume_and_commit,
    count,
    create_topic,
    delete_records_before,
    delete_topics,
    end_offsets,
    produce,
    set_topic_config,
    topic_exists,
    unique,
    wait_until,
)
from tests.replication.test_flow_metrics import scrape

pytestmark = pytest.mark.integration
PARTITIONS = 3


def fill(bootstrap: str, topic: str, first: int, last: int, **record) -> None:
    produce(bootstrap, topic, ({"key": f"k{i}".encode(), "value": b"v", "partition": p, **record}
                               for i in range(first, last + 1) for p in range(PARTITIONS)))


def losses_command(config_file: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dr_stream.cli", "losses", "--config", config_file, "--json"],
                          capture_output=True, text=True, timeout=120)


def test_records_deleted_before_a_stopped_flow_read_them_are_each_recorded_once_and_the_rest_copied(
        spark, dc1, dc2, tmp_path):
    topic = unique("loss.ret.")
    create_topic(dc1.bootstrap, topic, partitions=PARTITIONS, config={"segment.ms": "1000"})
    config = flow_config(dc1, dc2, tmp_path, name="loss-retention", topics={"include": [topic.replace(".", r"\.")]})
    fill(dc1.bootstrap, topic, 0, 59)
    try:
        with running_flow(spark, config):
            assert wait_until(lambda: count(dc2.bootstrap, topic) == 60 * PARTITIONS, 120)
        # stopped: the source takes 330 more per partition, and retention deletes them (and the 60
        # copied) before the flow is back. A segment rolls on the first append a second after it
        # began, so the 10 records written last start the segment retention keeps: stamped ten
        # minutes ahead, they are not expired when it runs.
        fill(dc1.bootstrap, topic, 60, 389)
        set_topic_config(dc1.bootstrap, topic, {"retention.ms": "1000"})
        time.sleep(1.5)
        fill(dc1.bootstrap, topic, 390, 399, timestamp=int(time.time() * 1000) + 600_000)
        assert wait_until(lambda: all(start == 390 for start, _ in end_offsets(dc1.bootstrap, topic).values()), 60), \
            end_offsets(dc1.bootstrap, topic)
        # the copy must keep its records: the flow syncs the topic's retention to the destination
        set_topic_config(dc1.bootstrap, topic, {"retention.ms": "86400000"})

        lines: list[str] = []
        with running_flow(spark, config, log=lines.append) as flow:
            assert wait_until(lambda: count(dc2.bootstrap, topic) == 70 * PARTITIONS, 120), count(dc2.bootstrap, topic)
            lost = scrape(flow.metrics)[("dr_stream_records_lost_total",
                                         (("cause", "retention"), ("flow", "loss-retention"), ("topic", topic)))]
        assert lost == 330 * PARTITIONS
        said = [line for line in lines if line.startswith("LOSS: ")]
        assert len(said) == PARTITIONS and all("330 records lost (retention), offsets 60-389" in x for x in said), said

        # a third start finds nothing new: the gap was read past, and a gap is never recorded twice
        with running_flow(spark, config):
            fill(dc1.bootstrap, topic, 400, 404)
            assert wait_until(lambda: count(dc2.bootstrap, topic) == 75 * PARTITIONS, 120)
        ledger = LossLedger(config.streaming.losses).read()
        assert [(x.topic, x.partition, x.first_offset, x.last_offset, x.records, x.cause) for x in ledger] == [
            (topic, p, 60, 389, 330, "retention") for p in range(PARTITIONS)]

        done = losses_command(flow_file(config, tmp_path))
        assert done.returncode == 2, done.stderr[-2000:]
        assert [(x["partition"], x["records"]) for x in json.loads(done.stdout)["losses"]] == [
            (p, 330) for p in range(PARTITIONS)]
    finally:
        delete_topics(dc1.bootstrap, [topic])
        delete_topics(dc2.bootstrap, [topic])


def test_records_deleted_just_before_a_running_flow_read_them_are_recorded_once_exactly_as_what_never_arrived(
        spark, dc1, dc2, tmp_path):
    topic = unique("loss.running.")
    create_topic(dc1.bootstrap, topic, partitions=2)
    # small batches, so the flow is far behind when the source deletes what it has not read yet,
    # and crosses the deletion in many batches that read nothing
    config = flow_config(dc1, dc2, tmp_path, name="loss-running", topics={"include": [topic.replace(".", r"\.")]},
                         streaming={"max_records_per_batch": 200, "trigger": "500ms"})
    # 4 KiB records: Spark's consumer holds what it fetched (about 1 MB) and copies it even once
    # deleted, so the loss starts past that
    produce(dc1.bootstrap, topic, ({"value": f"{i:<4096}".encode(), "partition": i % 2} for i in range(6000)))
    lines: list[str] = []
    try:
        with running_flow(spark, config, log=lines.append) as flow:
            assert wait_until(lambda: count(dc2.bootstrap, topic) >= 300 if topic_exists(dc2.bootstrap, topic)
                              else False, 120)
            delete_records_before(dc1.bootstrap, topic, 0, 2000)  # partition 1 keeps everything

            def arrived() -> set[int]:  # record i is offset i // 2 of partition i % 2
                return {int(r.value) for r in consume_all(dc2.bootstrap, topic)}

            # each partition is copied in order: its last record there means the rest is too
            assert wait_until(lambda: {5998, 5999} <= arrived(), 180), count(dc2.bootstrap, topic)
            assert wait_until(lambda: any(line.startswith("LOSS: ") for line in lines), 30), lines[-5:]
            lost = scrape(flow.metrics)[("dr_stream_records_lost_total",
                                         (("cause", "retention"), ("flow", "loss-running"), ("topic", topic)))]
        copied = arrived()
        assert set(range(1, 6000, 2)) <= copied and set(range(4000, 6000, 2)) <= copied
        ledger = [(x.partition, x.first_offset, x.last_offset, x.records, x.cause)
                  for x in LossLedger(config.streaming.losses).read() if x.topic == topic]
        # one entry for one deletion, up to the new log start, counting exactly its records
        assert len(ledger) == 1 and ledger[0][0] == 0 and ledger[0][2:] == (1999, 2000 - ledger[0][1], "retention")
        first = ledger[0][1]
        # none of them arrived, and the copy had reached the record just before them
        assert not {2 * o for o in range(first, 2000)} & copied and 2 * (first - 1) in copied, first
        assert lost == 2000 - first and len([line for line in lines if line.startswith("LOSS: ")]) == 1
    finally:
        delete_topics(dc1.bootstrap, [topic])
        delete_topics(dc2.bootstrap, [topic])


def test_a_flow_that_lost_nothing_says_so_and_exits_0(dc1, dc2, tmp_path):
    config = flow_config(dc1, dc2, tmp_path, name="loss-none")
    done = losses_command(flow_file(config, tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"losses": []}


def recreate(bootstrap: str, topic: str, partitions: int) -> None:
    """Deletes the topic and creates it again under its name, once the cluster has let it go."""
    from confluent_kafka import KafkaException

    from dr_stream.kafka import admin as kafka_admin

    kafka_admin.delete_topics(admin(bootstrap), [topic])
    for _ in range(40):
        try:
            create_topic(bootstrap, topic, partitions=partitions)
            return
        except KafkaException:  # still being deleted on the broker
            time.sleep(0.5)
    create_topic(bootstrap, topic, partitions=partitions)


def ends(bootstrap: str, topic: str) -> dict[int, int]:
    return {p: end for p, (_, end) in end_offsets(bootstrap, topic).items()}


def test_a_source_topic_created_again_has_each_new_record_copied_once_and_its_groups_placed_on_the_new_copies(
        spark, dc1, dc2, tmp_path):
    topic, kept, group = unique("loss.re."), unique("loss.kept."), unique("lre-")
    create_topic(dc1.bootstrap, topic, partitions=PARTITIONS)
    create_topic(dc1.bootstrap, kept, partitions=1)
    config = flow_config(dc1, dc2, tmp_path, name="loss-recreated",
                         topics={"include": [topic.replace(".", r"\."), kept.replace(".", r"\.")]},
                         offsets={"groups": {"include": ["lre-.*"]}})
    fill(dc1.bootstrap, topic, 0, 299)
    produce(dc1.bootstrap, kept, ({"value": b"k"} for _ in range(50)))
    lines: list[str] = []
    try:
        with running_flow(spark, config, log=lines.append) as flow:
            assert wait_until(lambda: ends(dc2.bootstrap, topic) == dict.fromkeys(range(PARTITIONS), 300), 120)
            recreate(dc1.bootstrap, topic, PARTITIONS)
            fill(dc1.bootstrap, topic, 0, 99, value=b"new")
            assert wait_until(lambda: ends(dc2.bootstrap, topic) == dict.fromkeys(range(PARTITIONS), 400), 120), \
                (ends(dc2.bootstrap, topic), [x for x in lines if "recreated" in x or "LOSS" in x])
            fill(dc1.bootstrap, topic, 100, 199, value=b"new")
            produce(dc1.bootstrap, kept, ({"value": b"k"} for _ in range(50)))
            assert wait_until(lambda: ends(dc2.bootstrap, topic) == dict.fromkeys(range(PARTITIONS), 500), 120)
            assert wait_until(lambda: ends(dc2.bootstrap, kept) == {0: 100}, 60)
            # a group of the new topic lands on the new topic's copies, not on the old one's
            consume_and_commit(dc1.bootstrap, topic, group, dict.fromkeys(range(PARTITIONS), 50), helper=False)
            assert wait_until(lambda: committed(dc2.bootstrap, group, topic, PARTITIONS) ==
                              dict.fromkeys(range(PARTITIONS), 350), 60), committed(dc2.bootstrap, group, topic, 3)
            lost = scrape(flow.metrics)[("dr_stream_records_lost_total",
                                         (("cause", "topic-recreated"), ("flow", "loss-recreated"), ("topic", topic)))]
        assert lost == 0  # an unknown count: the series says that it happened
        copies = [r for r in consume_all(dc2.bootstrap, topic) if r.offset >= 300]
        for p in range(PARTITIONS):
            assert [r.key for r in copies if r.partition == p] == [f"k{i}".encode() for i in range(200)]
        ledger = LossLedger(config.streaming.losses).read()
        assert [(x.topic, x.partition, x.cause, x.records, x.destination_offset) for x in ledger] == [
            (topic, p, "topic-recreated", -1, 300) for p in range(PARTITIONS)]

        # started again, the flow takes the old topic's runs for gone and neither skips nor repeats a record
        with running_flow(spark, config):
            fill(dc1.bootstrap, topic, 200, 204, value=b"new")
            assert wait_until(lambda: ends(dc2.bootstrap, topic) == dict.fromkeys(range(PARTITIONS), 505), 120)
        assert len(LossLedger(config.streaming.losses).read()) == PARTITIONS
        assert ends(dc2.bootstrap, kept) == {0: 100}
    finally:
        for cluster in (dc1, dc2):
            delete_topics(cluster.bootstrap, [topic, kept])


def test_a_running_flows_ledger_reads_what_it_appended_so_a_gap_found_again_is_not_recorded_twice(spark, tmp_path):
    import datetime as dt

    from dr_stream.replication.losses import Loss, record_found
    from dr_stream.runtime.delta_reads import DeltaReads

    ledger = LossLedger(str(tmp_path / "losses"), DeltaReads(), latest=True)
    assert ledger.read() == []  # read once before the table exists, as a flow's start does
    gap = Loss("t", 0, 60, 389, 330, "retention", dt.datetime.now(dt.UTC))
    said: list[str] = []
    assert record_found(ledger, spark, [gap], said.append, lambda loss: None) == [gap]
    # a restart of the same flow before it read past the gap finds it again
    assert record_found(ledger, spark, [gap], said.append, lambda loss: None) == []
    assert len(ledger.read()) == 1 and len(said) == 1
