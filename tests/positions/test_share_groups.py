"""Share groups (KIP-932), run by Kafka's own Java share consumer: their start offsets translated
and set on the destination through Kafka 4's admin API in the flow's helper JVM, only while the
destination group has no members, and the group resumes there where they were set."""

from __future__ import annotations

import time

import pytest

from dr_stream.kafka.group_offsets.kafka4 import Kafka4Groups, ShareGroupOffsets
from dr_stream.runtime.jvm import kafka_classpath
from tests.flows import flow_config, running_flow
from tests.kafka_tools import create_topic, delete_groups, delete_topics, produce, unique, wait_until
from tests.probes import probe, run_probe, staying

pytestmark = pytest.mark.integration

def member(cluster, group: str, topic: str, *mode: str) -> list[str]:
    """The probe's command line: Kafka's Java share consumer (the brokers' version) in `group`."""
    return probe("ShareMember", kafka_classpath(), cluster.bootstrap, group, topic, *mode)


def run_member(cluster, group: str, topic: str, *mode: str) -> list[str]:
    return run_probe(member(cluster, group, topic, *mode))


def start_offsets(groups: ShareGroupOffsets, group: str) -> dict[int, int]:
    found = groups.committed([group])[group]
    assert not isinstance(found, Exception), found
    return {p: c.offset for (_, p), c in found.items()}


def test_a_share_groups_start_offsets_are_set_exactly_on_the_destination_and_not_while_it_has_members(
        spark, dc1, dc2, tmp_path):
    topic, idle, group = unique("share."), unique("share-idle."), unique("share-app-")
    for cluster in (dc1, dc2):
        create_topic(cluster.bootstrap, topic, 2)
        create_topic(cluster.bootstrap, idle, 1)
    produce(dc2.bootstrap, topic, ({"value": b"local", "partition": 0} for _ in range(10)))  # shifts dc2's p0
    produce(dc1.bootstrap, topic, ({"value": f"r{i}".encode(), "partition": i % 2} for i in range(300)))
    produce(dc1.bootstrap, idle, ({"value": f"i{i}".encode()} for i in range(5)))  # the group never reads it on dc1
    config = flow_config(dc1, dc2, tmp_path, name="share-dc1-to-dc2",
                         topics={"include": [topic.replace(".", r"\."), idle.replace(".", r"\.")]},
                         offsets={"share_groups": {"include": ["share-app-.*"], "interval": "1s"}})
    helper = Kafka4Groups([config.source, config.destination])
    on_dc1, on_dc2 = ShareGroupOffsets(helper, config.source), ShareGroupOffsets(helper, config.destination)
    lines: list[str] = []
    try:
        # where an operator (or the group's consumers) left the group on dc1
        assert on_dc1.commit({group: {(topic, 0): 40, (topic, 1): 77}}, "") == {}
        # and how it begins a share-partition it never read (`latest` unless the group says otherwise)
        assert on_dc1.alter_configs(group, {"share.auto.offset.reset": "earliest"}, []) is None
        with running_flow(spark, config, log=lines.append) as flow:
            # dc1's offsets 40 and 77 are dc2's 50 (its partition 0 is shifted by 10) and 77
            assert wait_until(lambda: start_offsets(on_dc2, group) == {0: 50, 1: 77}, 60), \
                (start_offsets(on_dc2, group), [line for line in lines if "share" in line])
            assert any(line.startswith(f"share group {group}: start offsets set on dc2: ") and "(exact, source 40)"
                       in line for line in lines), lines
            assert "share-groups " in flow.metrics.loops_shown()  # its rounds are on the batch lines and /metrics
            assert on_dc2.configs([group]) == {group: {"share.auto.offset.reset": "earliest"}}
            assert f"share group {group}: settings made as on the source on dc2: share.auto.offset.reset=earliest" \
                in lines, [line for line in lines if "share" in line]

            # a member on dc2 (the group failed over): the group moving on dc1 is not set over it
            with staying(member(dc2, group, idle, "stay", "120")):
                assert wait_until(lambda: on_dc2.states([group])[group] == ("STABLE", 1), 60), \
                    on_dc2.states([group])
                # the group moved on dc1 meanwhile (its start offsets, as its consumers or an operator left them)
                assert on_dc1.commit({group: {(topic, 0): 120, (topic, 1): 130}}, "") == {}
                time.sleep(4)  # rounds every second: they had their chance
                assert start_offsets(on_dc2, group) == {0: 50, 1: 77}
                assert any(line.startswith(f"share group {group}: not set on dc2: group is STABLE on the destination")
                           for line in lines), [line for line in lines if "share" in line]
            # once the member left, dc1's position is set without dc1 moving again
            assert wait_until(lambda: start_offsets(on_dc2, group) == {0: 130, 1: 130}, 60), \
                start_offsets(on_dc2, group)
            # the partition dc1's group never read begins on dc2 as on dc1: at its first record, not at latest
            assert run_member(dc2, group, idle, "first", "1") == ["0:0:i0"]
            # a setting dropped on dc1 is dropped on dc2: both fall back to the same default
            assert on_dc1.alter_configs(group, {}, ["share.auto.offset.reset"]) is None
            assert wait_until(lambda: on_dc2.configs([group]) == {group: {}}, 30), on_dc2.configs([group])

        # the group resumes on dc2 at the copies of the records dc1's group had not finished with:
        # origin offsets 120 (r240) and 130 (r261)
        assert run_member(dc2, group, topic, "first", "2") == ["0:130:r240", "1:130:r261"]
    finally:
        helper.close()
        for cluster in (dc1, dc2):
            delete_groups(cluster.bootstrap, [group])
            delete_topics(cluster.bootstrap, [topic, idle])
