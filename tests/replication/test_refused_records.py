"""A record the destination refuses holds its partition, not the flow: every other partition
keeps copying, `status` and /metrics show the hold, `dr-stream skip` records it as a loss and
the partition goes on, and no record is lost or copied twice across hold, skip and restart
(real brokers, real Spark)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from dr_stream.replication.losses import LossLedger
from tests.flows import flow_config, flow_file, running_flow
from tests.kafka_tools import (
    consume_all,
    create_topic,
    delete_topics,
    end_offsets,
    produce,
    provenance,
    set_topic_config,
    unique,
    wait_until,
)
from tests.replication.test_flow_metrics import scrape

pytestmark = pytest.mark.integration


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dr_stream.cli", *args], capture_output=True, text=True, timeout=180)


def ends(bootstrap: str, topic: str) -> dict[int, int]:
    return {p: end for p, (_, end) in end_offsets(bootstrap, topic).items()}


def origins(bootstrap: str, topic: str, partition: int) -> Counter:
    """How often each source offset of `partition` is on the destination."""
    return Counter(provenance(r)[-1]["offset"] for r in consume_all(bootstrap, topic) if r.partition == partition)


def keyed(first: int, last: int, partition: int, value: bytes = b"v") -> list[dict]:
    return [{"key": f"k{i}".encode(), "value": value, "partition": partition} for i in range(first, last + 1)]


def test_a_refused_record_holds_its_partition_while_the_others_copy_and_skip_or_retry_lets_it_go_on_exactly_once(
        spark, dc1, dc2, tmp_path):
    # A destination topic that is compacted refuses a record without a key; the source's is not.
    # Flows that leave configs alone (`sync_configs: false`) meet this when the destination was
    # set up by hand.
    topic, other = unique("held."), unique("held.other.")
    create_topic(dc1.bootstrap, topic, partitions=2)
    create_topic(dc2.bootstrap, topic, partitions=2, config={"cleanup.policy": "compact"})
    create_topic(dc1.bootstrap, other, partitions=1)
    topics = {"include": [topic.replace(".", r"\."), other.replace(".", r"\.")], "sync_configs": False}
    config = flow_config(dc1, dc2, tmp_path, name="held", topics=topics)
    file = flow_file(config, tmp_path, topics=topics)
    no_key = {"key": None, "value": b"no key"}
    produce(dc1.bootstrap, topic, [*keyed(0, 49, 0), {**no_key, "partition": 0}, *keyed(51, 99, 0), *keyed(0, 99, 1)])
    produce(dc1.bootstrap, other, keyed(0, 49, 0))
    lines: list[str] = []
    held_gauge = ("dr_stream_partitions_held", (("flow", "held"),))
    try:
        with running_flow(spark, config, log=lines.append) as flow:
            # The producer goes on with the batches queued behind a refused one, so a few records past
            # the held one may reach the destination before the hold takes effect (copied once, never
            # again): a held partition's end is at or past the refused record, and stays short of the rest.
            assert wait_until(lambda: ends(dc2.bootstrap, topic)[1] == 100 and ends(dc2.bootstrap, other) == {0: 50}
                              and scrape(flow.metrics)[held_gauge] == 1, 120), \
                (ends(dc2.bootstrap, topic), [x for x in lines if "HELD" in x or "failed" in x])
            held = [x for x in lines if x.startswith("HELD: ")]
            assert len(held) == 1 and f"{topic}[0] held at offset 50 (" in held[0], held
            assert "bytes): InvalidRecordException: " in held[0] and "without key" in held[0], held[0]

            # held: the partition copies nothing past the refused record; every other one goes on,
            # until it meets a refused record of its own
            produce(dc1.bootstrap, topic, [*keyed(100, 149, 0), *keyed(100, 119, 1), {**no_key, "partition": 1},
                                           *keyed(121, 149, 1)])
            produce(dc1.bootstrap, other, keyed(50, 99, 0))
            assert wait_until(lambda: ends(dc2.bootstrap, topic)[1] >= 120 and ends(dc2.bootstrap, other) == {0: 100}
                              and scrape(flow.metrics)[held_gauge] == 2, 120), \
                (ends(dc2.bootstrap, topic), [x for x in lines if "HELD" in x or "failed" in x])
            # 99 records of the first wave can be copied at most: none of the second wave is
            held_ends = ends(dc2.bootstrap, topic)
            assert 50 <= held_ends[0] < 100 and 120 <= held_ends[1] < 150, held_ends

            status = cli("status", "--config", file, "--json")
            assert status.returncode == 2, status.stderr[-2000:]
            assert [(h["topic"], h["partition"], h["offset"]) for h in json.loads(status.stdout)["held"]] == [
                (topic, 0, 50), (topic, 1, 120)]
            assert f"HELD {topic}[0] held at offset 50" in status.stderr

            wrong = cli("skip", "--config", file, "--topic", topic, "--partition", "0", "--offset", "49")
            assert wrong.returncode == 64 and f"held now: {topic}[0] at offset 50, {topic}[1] at offset 120" \
                in wrong.stderr, wrong.stderr[-2000:]
            skipped = cli("skip", "--config", file, "--topic", topic, "--partition", "0", "--offset", "50")
            assert skipped.returncode == 0, skipped.stderr[-2000:]
            assert "1 records lost (refused), offsets 50-50" in skipped.stdout
            # the other is taken once the destination is changed to take it
            set_topic_config(dc2.bootstrap, topic, {"cleanup.policy": "delete"})
            retried = cli("retry", "--config", file, "--topic", topic, "--partition", "1", "--offset", "120")
            assert retried.returncode == 0, retried.stderr[-2000:]

            assert wait_until(lambda: ends(dc2.bootstrap, topic) == {0: 149, 1: 150}, 120), \
                (ends(dc2.bootstrap, topic), lines[-10:])
            assert wait_until(lambda: scrape(flow.metrics)[held_gauge] == 0, 60)
        # a restart after the skip neither copies the held-back records again nor holds anything
        with running_flow(spark, config, log=lines.append):
            produce(dc1.bootstrap, topic, [*keyed(150, 159, 0)])
            assert wait_until(lambda: ends(dc2.bootstrap, topic) == {0: 159, 1: 150}, 120), ends(dc2.bootstrap, topic)
        copied, retried_copies = origins(dc2.bootstrap, topic, 0), origins(dc2.bootstrap, topic, 1)
        assert set(copied) == set(range(160)) - {50} and max(copied.values()) == 1
        assert set(retried_copies) == set(range(150)) and max(retried_copies.values()) == 1
        assert [(x.partition, x.first_offset, x.records, x.cause) for x in LossLedger(config.streaming.losses).read()] \
            == [(0, 50, 1, "refused")]
        losses = cli("losses", "--config", file, "--json")
        assert losses.returncode == 2 and json.loads(losses.stdout)["losses"][0]["cause"] == "refused"
        assert json.loads(cli("status", "--config", file, "--json").stdout)["held"] == []
        assert not any("Traceback" in x for x in lines)
    finally:
        delete_topics(dc1.bootstrap, [topic, other])
        delete_topics(dc2.bootstrap, [topic, other])


def test_without_provenance_a_refused_record_still_holds_only_its_partition_and_a_skip_lets_it_go_on(
        spark, dc1, dc2, tmp_path):
    # No provenance, so no offset index: the sink names the refused record from its stamp, and the
    # flow copies at least once (a held partition is read again from its checkpoint's position).
    topic = unique("held.bare.")
    create_topic(dc1.bootstrap, topic, partitions=2)
    create_topic(dc2.bootstrap, topic, partitions=2, config={"cleanup.policy": "compact"})
    topics = {"include": [topic.replace(".", r"\.")], "sync_configs": False}
    config = flow_config(dc1, dc2, tmp_path, name="held-bare", topics=topics, provenance={"enabled": False})
    file = flow_file(config, tmp_path, topics=topics, provenance={"enabled": False})
    produce(dc1.bootstrap, topic, [*keyed(0, 29, 0), {"key": None, "value": b"no key", "partition": 0},
                                   *keyed(31, 59, 0), *keyed(0, 59, 1)])
    lines: list[str] = []

    def keys(partition: int) -> Counter:
        return Counter(r.key for r in consume_all(dc2.bootstrap, topic) if r.partition == partition)

    try:
        with running_flow(spark, config, log=lines.append) as flow:
            assert wait_until(lambda: any(x.startswith("HELD: ") for x in lines)
                              and ends(dc2.bootstrap, topic)[1] == 60, 120), (ends(dc2.bootstrap, topic), lines[-10:])
            held = [x for x in lines if x.startswith("HELD: ")]
            assert len(held) == 1 and f"{topic}[0] held at offset 30 (" in held[0], held
            produce(dc1.bootstrap, topic, keyed(60, 79, 1))
            assert wait_until(lambda: ends(dc2.bootstrap, topic)[1] >= 80, 60), "the other partition goes on"
            skipped = cli("skip", "--config", file, "--topic", topic, "--partition", "0", "--offset", "30")
            assert skipped.returncode == 0, skipped.stderr[-2000:]
            assert wait_until(lambda: set(keys(0)) == {f"k{i}".encode() for i in range(60) if i != 30}, 120), \
                (ends(dc2.bootstrap, topic), lines[-10:])
            restarts = scrape(flow.metrics).get(("dr_stream_query_restarts_total",
                                                 (("flow", "held-bare"), ("query", config.replicate_query))), 0)
        assert None not in keys(0), "the refused record was skipped, not copied"
        assert set(keys(1)) == {f"k{i}".encode() for i in range(80)}
        # the stamp that named the source record is gone; the source timestamp stays
        source = {(r.key, r.timestamp) for r in consume_all(dc1.bootstrap, topic) if r.partition == 1}
        copies = [r for r in consume_all(dc2.bootstrap, topic) if r.partition == 1]
        assert {(r.key, r.timestamp) for r in copies} == source and all(r.headers == () for r in copies)
        assert restarts <= 3, f"no crash loop: {restarts} restarts"
        assert [(x.partition, x.first_offset, x.records, x.cause) for x in LossLedger(config.streaming.losses).read()] \
            == [(0, 30, 1, "refused")]
        assert not any("Traceback" in x for x in lines)
    finally:
        delete_topics(dc1.bootstrap, [topic])
        delete_topics(dc2.bootstrap, [topic])
