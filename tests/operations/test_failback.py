"""Failback scenarios on real brokers: a cluster dies, the other takes over, the first comes back.

The module starts its own two clusters (fb1, fb2), because these tests stop and restart a
broker. Records carry their identity in the value ("<cluster>-<partition>-<n>"), so "exactly
once" is a count per value and a group's history is the set of values it read on either side:
0 re-read = nothing read twice across clusters; 0 skipped = nothing it had not read is missing.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Consumer, TopicPartition

from dr_stream.core.provenance import newest_entry
from dr_stream.kafka.clients import CONSUME_WAIT_S
from dr_stream.kafka.reachability import reachable_cluster_id
from dr_stream.operations.failback import FailbackError, failback
from dr_stream.operations.failover import failover
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.operations.reset_flow import reset_flow
from tests.clusters import started_cluster
from tests.flows import flow_config, flow_file, running_flow
from tests.kafka_tools import (
    committed,
    consume_all,
    consume_and_commit,
    count,
    create_topic,
    delete_topics,
    produce,
    resume_as_group,
    topic_exists,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fb1(cluster_home):
    yield from started_cluster(cluster_home, "fb1", 24092)


@pytest.fixture(scope="module")
def fb2(cluster_home):
    yield from started_cluster(cluster_home, "fb2", 25092)


@pytest.fixture
def topic(fb1, fb2) -> Iterator[str]:
    name = unique("fb.")
    yield name
    for cluster in (fb1, fb2):
        if cluster.is_running():
            delete_topics(cluster.bootstrap, [name])


@contextmanager
def outage(cluster):
    """The cluster is down inside the block and back (same data, same cluster.id) after it."""
    cluster.stop()
    try:
        yield
    finally:
        cluster.start()


def produce_values(cluster, topic: str, prefix: str, partitions: int, n: int) -> None:
    produce(cluster.bootstrap, topic, ({"key": f"{prefix}-{p}-{i}".encode(), "value": f"{prefix}-{p}-{i}".encode(),
                                        "partition": p} for p in range(partitions) for i in range(n)))


def values(cluster, topic: str) -> list[str]:
    return [r.value.decode() for r in consume_all(cluster.bootstrap, topic)]


def values_below(cluster, topic: str, upto: dict[int, int]) -> list[str]:
    return [r.value.decode() for r in consume_all(cluster.bootstrap, topic) if r.offset < upto[r.partition]]


def advance(cluster, topic: str, group: str, partitions: int, n: int) -> list[str]:
    """The group reads `n` more records per partition from its committed offsets and commits (plain)."""
    start = committed(cluster.bootstrap, group, topic, partitions)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
    read: dict[int, list] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, start.get(p, 0)) for p in range(partitions)])
        deadline = time.monotonic() + 60
        while any(len(v) < n for v in read.values()) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=CONSUME_WAIT_S):
                if msg.error() is None and len(read[msg.partition()]) < n:
                    read[msg.partition()].append(msg)
        assert all(len(v) == n for v in read.values()), f"{group} could not read {n} per partition"
        consumer.commit(offsets=[TopicPartition(topic, p, msgs[-1].offset() + 1) for p, msgs in read.items()],
                        asynchronous=False)
    finally:
        consumer.close()
    return [m.value().decode() for msgs in read.values() for m in msgs]


def flows(fb1, fb2, work, topic: str, tag: str):
    sections = {"topics": {"include": [re.escape(topic)]}, "offsets": {"groups": {"include": ["fbg-.*"]}}}
    return (flow_config(fb1, fb2, work, name=f"{tag}-fwd", **sections),
            flow_config(fb2, fb1, work, name=f"{tag}-back", **sections))


def assert_each_once(found: list[str]) -> None:
    twice = {v: n for v, n in Counter(found).items() if n > 1}
    assert not twice, f"{len(twice)} values more than once, e.g. {list(twice.items())[:3]}"


def assert_resumes_exactly(cluster, topic: str, group: str, partitions: int, seen: list[str],
                           expected: set[str]) -> None:
    after = [r.value.decode() for r in resume_as_group(cluster.bootstrap, topic, group, partitions)]
    assert_each_once(after)
    reread = set(after) & set(seen)
    skipped = expected - set(after) - set(seen)
    assert (len(reread), len(skipped)) == (0, 0), f"{group}: {len(reread)} re-read, {len(skipped)} skipped"


def wait_stable(cluster, topic: str, total: int, timeout: float = 120) -> None:
    assert wait_until(lambda: count(cluster.bootstrap, topic) == total, timeout), (
        f"{topic} on {cluster.alias}: {count(cluster.bootstrap, topic)} records, expected {total}")
    time.sleep(6)  # several triggers: a loop or a re-copy would show up as more records
    assert count(cluster.bootstrap, topic) == total


def back_to_normal(spark, fwd, fb1, fb2, topic: str, partitions: int, new: int, expected_on_fb2: int) -> list[str]:
    """Runs the dc1 -> dc2 flow again while dc1 takes `new` records per partition; dc2 must end
    with exactly `expected_on_fb2` records, each once (nothing re-copied, nothing looping)."""
    with running_flow(spark, fwd):
        produce_values(fb1, topic, "dc1-new", partitions, new)
        wait_stable(fb2, topic, expected_on_fb2)
    on_fb2 = values(fb2, topic)
    assert_each_once(on_fb2)
    return on_fb2


class TestActivePassiveFailback:
    def test_dc2_outage_records_reach_dc1_once_unreplicated_are_left_out_and_groups_move_back_exactly(
            self, spark, fb1, fb2, topic, tmp_path):
        g1, g2 = unique("fbg-a1-"), unique("fbg-a2-")
        fwd, back = flows(fb1, fb2, tmp_path, topic, "ap")
        create_topic(fb1.bootstrap, topic, partitions=3)
        produce_values(fb1, topic, "dc1", 3, 1000)
        at = {g1: {0: 200, 1: 300, 2: 400}, g2: {0: 900, 1: 900, 2: 900}}
        with running_flow(spark, fwd):
            assert wait_until(lambda: count(fb2.bootstrap, topic) == 3000, 120)
            for group, upto in at.items():
                consume_and_commit(fb1.bootstrap, topic, group, upto, helper=True)
            assert wait_until(lambda: all(committed(fb2.bootstrap, g, topic, 3) == at[g] for g in at), 60)
        late = [("dc1-late-0-0", 0), ("dc1-late-0-1", 0), ("dc1-late-2-0", 2)]
        produce(fb1.bootstrap, topic, ({"value": v.encode(), "partition": p} for v, p in late))
        seen = {g: values_below(fb1, topic, upto) for g, upto in at.items()}

        with outage(fb1):  # dc1 fails; its groups already have their positions on dc2
            produce_values(fb2, topic, "dc2", 3, 500)
            seen[g1] += advance(fb2, topic, g1, 3, 100)  # still among the copies of dc1's records
            seen[g2] += advance(fb2, topic, g2, 3, 350)  # past them, 250 into dc2's own

        report = failback(back, spark, f"{g1}|{g2}", timeout_s=300)

        found = [(p.partition, p.records, p.offsets) for p in report.unreplicated]
        assert found == [(0, 2, (1000, 1001)), (2, 1, (1000,))]
        assert (report.copied, report.skipped) == (1500, 3000)
        on_fb1 = values(fb1, topic)
        assert_each_once(on_fb1)
        assert len(on_fb1) == 3000 + 3 + 1500
        left_out = {v for v, _ in late}
        methods = {(p.translation.group, p.translation.method) for p in report.positions.rows}
        assert methods == {(g1, "returned"), (g2, "exact")}
        assert_resumes_exactly(fb1, topic, g1, 3, seen[g1], set(on_fb1))
        # g2 was already past the failover point: the left-out records sit before its position on dc1.
        assert_resumes_exactly(fb1, topic, g2, 3, seen[g2], set(on_fb1) - left_out)

        # Back to normal: dc1 -> dc2 resumes from its checkpoint.
        on_fb2 = back_to_normal(spark, fwd, fb1, fb2, topic, 3, 50, 3000 + 1500 + 150)
        assert not left_out & set(on_fb2)


class TestUnreplicatedRecords:
    def test_include_unreplicated_from_the_command_line_copies_them_to_dc2_once(self, spark, fb1, fb2, topic,
                                                                               tmp_path):
        fwd, back = flows(fb1, fb2, tmp_path, topic, "un")
        create_topic(fb1.bootstrap, topic, partitions=2)
        produce_values(fb1, topic, "dc1", 2, 500)
        with running_flow(spark, fwd):
            assert wait_until(lambda: count(fb2.bootstrap, topic) == 1000, 120)
        before = time.time() * 1000
        produce(fb1.bootstrap, topic, ({"value": f"dc1-late-1-{i}".encode(), "partition": 1} for i in range(5)))
        with outage(fb1):
            produce_values(fb2, topic, "dc2", 2, 100)
        config_file = flow_file(back, tmp_path, topics={"include": [re.escape(topic)]},
                                offsets={"groups": {"include": ["fbg-none"]}})
        done = subprocess.run([sys.executable, "-m", "dr_stream.cli", "failback", "--config", config_file,
                               "--include-unreplicated", "--timeout", "300", "--json"],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "lag 0 records" in done.stderr  # progress went to stderr, the report to stdout
        report = json.loads(done.stdout)
        [part] = report["unreplicated"]
        assert (part["partition"], part["records"], part["offsets"]) == (1, 5, [500, 501, 502, 503, 504])
        assert part["first_timestamp"] >= before - 1000
        assert report["unreplicated_action"].startswith("copied to fb2 (5 records)")
        assert report["copied"] == 200

        fb1_id = reachable_cluster_id(fb1.config)
        late = [r for r in consume_all(fb2.bootstrap, topic) if r.value.startswith(b"dc1-late")]
        assert sorted(r.value.decode() for r in late) == [f"dc1-late-1-{i}" for i in range(5)]
        assert [newest_entry(r.headers, "__replicator_id")["offset"] for r in late] == [500, 501, 502, 503, 504]
        assert all(newest_entry(r.headers, "__replicator_id")["cluster"] == fb1_id for r in late)
        back_to_normal(spark, fwd, fb1, fb2, topic, 2, 10, 1000 + 200 + 5 + 20)  # the 5 are not copied again


class TestFullRestore:
    def test_dc1_lost_its_data_is_restored_from_dc2_then_normal_replication_recopies_nothing(
            self, spark, fb1, fb2, topic, tmp_path):
        group = unique("fbg-r-")
        fwd, back = flows(fb1, fb2, tmp_path, topic, "fr")
        create_topic(fb1.bootstrap, topic, partitions=2)
        produce_values(fb1, topic, "dc1", 2, 300)
        with running_flow(spark, fwd):
            assert wait_until(lambda: count(fb2.bootstrap, topic) == 600, 120)
        with outage(fb1):
            produce_values(fb2, topic, "dc2", 2, 100)
            consume_and_commit(fb2.bootstrap, topic, group, {0: 250, 1: 350}, helper=False)
        seen = values_below(fb2, topic, {0: 250, 1: 350})

        with pytest.raises(FailbackError, match=f"fb1 still holds {re.escape(topic)} \\(600 records\\)"):
            failback(back, spark, restore=True)
        delete_topics(fb1.bootstrap, [topic])  # the data dc1 came back with is unusable
        assert wait_until(lambda: not topic_exists(fb1.bootstrap, topic), 60)

        report = failback(back, spark, re.escape(group), restore=True, timeout_s=300)

        assert (report.mode, report.copied, report.skipped) == ("restore", 800, 0)
        on_fb1, on_fb2 = values(fb1, topic), values(fb2, topic)
        assert_each_once(on_fb1)
        assert sorted(on_fb1) == sorted(on_fb2)  # including the 600 records that originated on dc1
        assert_resumes_exactly(fb1, topic, group, 2, seen, set(on_fb1))

        assert any(line.startswith("moved ") for line in reset_flow(fwd, spark))
        back_to_normal(spark, fwd, fb1, fb2, topic, 2, 20, 800 + 40)  # fresh: reads the restored log, copies only new


class TestActiveActiveFailback:
    def test_both_flows_resume_after_dc1_returns_nothing_loops_and_a_group_moves_back_exactly(
            self, spark, fb1, fb2, topic, tmp_path):
        group = unique("fbg-aa-")
        fwd, back = flows(fb1, fb2, tmp_path, topic, "aa")
        for cluster in (fb1, fb2):
            create_topic(cluster.bootstrap, topic, partitions=1)
        with running_flow(spark, fwd), running_flow(spark, back):
            produce_values(fb1, topic, "dc1", 1, 300)
            produce_values(fb2, topic, "dc2", 1, 300)
            assert wait_until(lambda: count(fb1.bootstrap, topic) == 600 and count(fb2.bootstrap, topic) == 600, 120)
            seen = advance(fb2, topic, group, 1, 400)
            with outage(fb1):  # both flows keep running; they wait for dc1 or restart from their checkpoints
                produce_values(fb2, topic, "dc2-outage", 1, 200)
                seen += advance(fb2, topic, group, 1, 300)
                time.sleep(5)
            wait_stable(fb1, topic, 800, timeout=240)
            wait_stable(fb2, topic, 800)
            on_fb1 = values(fb1, topic)
            assert_each_once(on_fb1)
            assert sorted(on_fb1) == sorted(values(fb2, topic))
            rows = failover(back, FlowTables.of(back), re.escape(group)).rows  # move the group back to dc1
        assert [r.action.text for r in rows] in (["committed"], ["unchanged"])
        assert_resumes_exactly(fb1, topic, group, 1, seen, set(on_fb1))
