"""`streaming.mode: realtime`: every guarantee of the micro-batch mode, with Spark's real-time mode.

The session has 4 task slots (conftest); a real-time flow takes one per source partition plus
one, so the topics here are small. Exactly once after kill -9 in this mode is in
test_crash_recovery.py.
"""

from __future__ import annotations

import time

import pytest

from dr_stream.core.config import ConfigError
from dr_stream.replication.flow import build_flow
from tests.flows import flow_config, running_flow
from tests.index.test_write_path_index import GroupWatch, commit_at, dest_offset_of, records
from tests.kafka_tools import (
    add_partitions,
    consume_all,
    count,
    create_topic,
    delete_topics,
    partition_count,
    produce,
    provenance,
    topic_exists,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration
REALTIME = {"mode": "realtime", "trigger": "5s"}
YEARS_AGO_MS = 1_262_304_000_000


def test_realtime_flow_refuses_to_start_without_a_task_slot_per_partition(spark, dc1, dc2, topics, tmp_path):
    topic = unique("rt.wide.")
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, 4)  # 4 partitions + 1 > the session's 4 slots
    config = flow_config(dc1, dc2, tmp_path, name="rt-wide", topics={"include": [topic.replace(".", "\\.")]},
                         streaming=REALTIME)
    flow = build_flow(config, spark)
    try:
        with pytest.raises(ConfigError, match=r"needs 5 task slots \(4 source partitions.*has 4 \(master local\[4\]\)"):
            flow.start()
    finally:
        flow.close()


def test_realtime_follows_new_topics_and_partitions_before_their_records_are_written(
        spark, dc1, dc2, topics, tmp_path):
    prefix = unique("rt.live")
    first, later = f"{prefix}.a", f"{prefix}.b"
    topics += [first, later]
    create_topic(dc1.bootstrap, first, 1)
    produce(dc1.bootstrap, first, [{"value": b"1"}])
    config = flow_config(dc1, dc2, tmp_path, name="rt-live", topics={"include": [f"{prefix}\\..*"]},
                         streaming=REALTIME)
    with running_flow(spark, config):
        assert wait_until(lambda: topic_exists(dc2.bootstrap, first) and count(dc2.bootstrap, first) == 1, 90)
        create_topic(dc1.bootstrap, later, 1)
        produce(dc1.bootstrap, later, [{"value": b"new"}])
        assert wait_until(lambda: topic_exists(dc2.bootstrap, later) and count(dc2.bootstrap, later) == 1, 90)
        add_partitions(dc1.bootstrap, first, 2)
        produce(dc1.bootstrap, first, [{"value": b"p1", "partition": 1}])
        assert wait_until(lambda: partition_count(dc2.bootstrap, first) == 2, 60)
        assert wait_until(lambda: count(dc2.bootstrap, first) == 2, 90)
    assert [r.partition for r in consume_all(dc2.bootstrap, first) if r.value == b"p1"] == [1]


@pytest.fixture(scope="module")
def pair(spark, dc1, dc2, tmp_path_factory):
    """dc1 <-> dc2 in real-time mode on `rt.aa.*`, identical topic names, one partition each."""
    work = tmp_path_factory.mktemp("rt")
    topic = unique("rt.aa.")
    for cluster in (dc1, dc2):
        create_topic(cluster.bootstrap, topic, 1, {"retention.ms": "-1"})
    groups = {"groups": {"include": ["rt-.*"]}}
    there = flow_config(dc1, dc2, work, name="rt-there", topics={"include": [r"rt\.aa\..*"]}, offsets=groups,
                        streaming=REALTIME)
    back = flow_config(dc2, dc1, work, name="rt-back", topics={"include": [r"rt\.aa\..*"]}, offsets=groups,
                       streaming=REALTIME)
    with running_flow(spark, there) as t, running_flow(spark, back) as b:
        yield {"topic": topic, "there": t, "back": b}
    for cluster in (dc1, dc2):
        delete_topics(cluster.bootstrap, [topic])


def test_realtime_copies_keys_values_headers_timestamps_and_tombstones_and_never_loops(pair, dc1, dc2):
    topic = pair["topic"]
    produce(dc2.bootstrap, topic, ({"value": f"dc2-{i}".encode()} for i in range(50)))
    sent = [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), "timestamp": YEARS_AGO_MS + i,
             "headers": [("app", f"h{i}".encode())]} for i in range(200)]
    sent.append({"key": b"gone", "value": None})
    produce(dc1.bootstrap, topic, sent)
    assert wait_until(lambda: count(dc2.bootstrap, topic) >= 251 and count(dc1.bootstrap, topic) >= 251, 120)
    time.sleep(3)  # a loop would show up as more copies here
    assert (count(dc1.bootstrap, topic), count(dc2.bootstrap, topic)) == (251, 251)

    source = {r.offset: r for r in consume_all(dc1.bootstrap, topic) if not provenance(r)}
    copies = [r for r in consume_all(dc2.bootstrap, topic) if provenance(r)]
    assert len(copies) == len(source) == 201
    dc1_id = pair["there"].source_cluster_id
    for c in copies:
        origin = provenance(c)[-1]
        s = source[origin["offset"]]
        assert origin["cluster"] == dc1_id and len(provenance(c)) == 1
        assert (c.key, c.value, c.partition, c.timestamp, c.headers[:-1]) == (
            s.key, s.value, s.partition, s.timestamp, s.headers)
    assert any(c.value is None and c.key == b"gone" for c in copies), "tombstone stays a tombstone"


@pytest.mark.parametrize("behind", [0, 1_000], ids=["head", "1000-behind"])
def test_realtime_first_synced_offset_is_the_exact_one(pair, dc1, dc2, behind):
    topic, group = pair["topic"], unique("rt-")
    produce(dc1.bootstrap, topic, records(behind + 2_000))
    end = count(dc1.bootstrap, topic)
    source_id = pair["there"].source_cluster_id
    assert wait_until(lambda: dest_offset_of(dc2.bootstrap, topic, end - 1, source_id) is not None, 120)
    watch = GroupWatch(dc2.bootstrap, group, topic)
    commit_at(dc1.bootstrap, group, topic, end - behind)
    # at the head: just after the last record on dc2; behind: the copy of the committed record
    expected = count(dc2.bootstrap, topic) if not behind else dest_offset_of(dc2.bootstrap, topic, end - behind,
                                                                             source_id)
    assert wait_until(lambda: watch.seen and watch.seen[-1][1] == expected, 60), (
        f"dc2 group never reached {expected}: {watch.seen}")
    time.sleep(2)
    seen = watch.stop()
    assert [v for _, v in seen] == [expected] * len(seen), f"first synced must be exact and final: {seen}"
