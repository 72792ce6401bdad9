"""Kafka Streams applications' groups on their own protocol (KIP-1071, `group.protocol=streams`),
run by Kafka's own Streams library: polled, translated and synced like consumer groups, and only
while the destination's Streams group has no members (told by Kafka 4's admin API, since the
consumer-group describe takes a running Streams group for an absent one)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from dr_stream.kafka.group_offsets.kafka4 import Kafka4Groups, StreamsGroupStates
from dr_stream.operations.failover import failover
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.positions.translation_log import TranslationLog
from dr_stream.runtime.jvm import kafka_streams_classpath
from tests.flows import flow_config, running_flow
from tests.kafka_tools import committed, create_topic, delete_groups, delete_topics, produce, unique, wait_until
from tests.probes import probe, staying

pytestmark = pytest.mark.integration

@contextmanager
def streams_app(cluster, application: str, topic: str, *mode: str) -> Iterator[list[str]]:
    """Kafka Streams' own library running `application` over `topic` on `cluster` until the block
    ends; yields the lines it prints ("running", then "partition:offset:value" per record).
    `mode` "paused": it joins its group and processes nothing."""
    with staying(probe("StreamsApp", kafka_streams_classpath(), cluster.bootstrap, application, topic, "streams",
                        "180", *mode)) as lines:
        assert wait_until(lambda: "running" in lines, 90), lines
        yield lines


def first_per_partition(lines: list[str]) -> list[str]:
    first: dict[str, str] = {}
    for line in lines:
        if line != "running":
            first.setdefault(line.split(":")[0], line)
    return [first[p] for p in sorted(first)]


def test_a_streams_group_is_synced_exactly_and_not_while_its_application_runs_on_the_destination(
        spark, dc1, dc2, tmp_path):
    topic, group = unique("streams."), unique("streams-app-")
    for cluster in (dc1, dc2):
        create_topic(cluster.bootstrap, topic, 2)
    produce(dc2.bootstrap, topic, ({"value": b"local", "partition": 0} for _ in range(10)))  # shifts dc2's p0
    produce(dc1.bootstrap, topic, ({"value": f"r{i}".encode(), "partition": i % 2} for i in range(80)))
    config = flow_config(dc1, dc2, tmp_path, name="streams-dc1-to-dc2",
                         topics={"include": [topic.replace(".", r"\.")]},
                         offsets={"groups": {"include": ["streams-app-.*"]}, "streams_groups": True})
    helper = Kafka4Groups([config.source, config.destination])
    on_dc1, on_dc2 = StreamsGroupStates(helper, config.source), StreamsGroupStates(helper, config.destination)
    try:
        with running_flow(spark, config):
            with streams_app(dc1, group, topic):
                assert wait_until(lambda: committed(dc1.bootstrap, group, topic, 2) == {0: 40, 1: 40}, 60)
                assert on_dc1.listed().get(group) == "STABLE"  # a Streams group, not a consumer group
            assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 2) == {0: 50, 1: 40}, 60), \
                committed(dc2.bootstrap, group, topic, 2)

            # the application failed over to dc2 (paused there, so it commits nothing itself): its
            # group there is not written while it runs, and the flow says why
            with streams_app(dc2, group, topic, "paused"):
                assert wait_until(lambda: on_dc2.states([group])[group] == ("STABLE", 1), 60), on_dc2.states([group])
                produce(dc1.bootstrap, topic, ({"value": f"s{i}".encode(), "partition": i % 2} for i in range(20)))
                with streams_app(dc1, group, topic):
                    assert wait_until(lambda: committed(dc1.bootstrap, group, topic, 2) == {0: 50, 1: 50}, 60)

                def actions() -> set[str]:  # each read a new snapshot of the flow's translation log
                    return {row["action"] for row in TranslationLog(config.streaming.translations).latest()
                            if row["group"] == group}

                assert wait_until(lambda: actions() == {"skipped: group is STABLE on the destination (1 members)"},
                                  30), actions()
                assert committed(dc2.bootstrap, group, topic, 2) == {0: 50, 1: 40}
            # once it stopped there, dc1's position is synced without dc1 committing again
            assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 2) == {0: 60, 1: 50}, 60), \
                committed(dc2.bootstrap, group, topic, 2)
            # `failover` finds the Streams group on the live source (librdkafka's listing leaves it out)
            moved = failover(config, FlowTables.of(config), re.escape(group))
            assert {(p.translation.partition, p.translation.offset, p.action.text) for p in moved.rows} == {
                (0, 60, "unchanged"), (1, 50, "unchanged")}

            # the application resumes on dc2 with the first record it had not processed on dc1
            produce(dc1.bootstrap, topic, ({"value": f"late{i}".encode(), "partition": i} for i in range(2)))
            with streams_app(dc2, group, topic) as lines:
                assert wait_until(lambda: len(first_per_partition(lines)) == 2, 60), lines
                assert first_per_partition(lines) == ["0:60:late0", "1:50:late1"]
    finally:
        helper.close()
        for cluster in (dc1, dc2):
            delete_groups(cluster.bootstrap, [group])
            delete_topics(cluster.bootstrap, [topic])
