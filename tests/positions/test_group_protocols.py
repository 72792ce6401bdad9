"""Consumer groups on Kafka 4's protocol (KIP-848, `group.protocol=consumer`), run by Kafka's own
Java client: polled, translated and synced like classic groups, and only while the destination
group is empty."""

from __future__ import annotations

import time

import pytest

from dr_stream.kafka.group_offsets.consumer_groups import group_states
from dr_stream.runtime.jvm import kafka_classpath
from tests.flows import flow_config, running_flow
from tests.kafka_tools import (
    admin,
    committed,
    create_topic,
    delete_groups,
    delete_topics,
    produce,
    unique,
    wait_until,
)
from tests.probes import probe, run_probe, staying

pytestmark = pytest.mark.integration

def member(cluster, group: str, topic: str, *mode: str, protocol: str = "consumer") -> list[str]:
    """The probe's command line: Kafka's Java client (the brokers' version) as a member of `group`."""
    return probe("GroupMember", kafka_classpath(), cluster.bootstrap, group, topic, protocol, *mode)


def run_member(cluster, group: str, topic: str, *mode: str) -> list[str]:
    return run_probe(member(cluster, group, topic, *mode))


def group_type(cluster, group: str) -> str | None:
    client = admin(cluster.bootstrap)  # the client must outlive its future
    found = client.list_consumer_groups(request_timeout=15).result(timeout=20).valid
    return next((g.type.name for g in found if g.group_id == group), None)


def test_a_kip_848_group_is_synced_exactly_and_not_while_it_has_members_on_the_destination(
        spark, dc1, dc2, tmp_path):
    topic, group = unique("proto."), unique("proto-app-")
    create_topic(dc1.bootstrap, topic, 2)
    create_topic(dc2.bootstrap, topic, 2)
    produce(dc2.bootstrap, topic, ({"value": b"local", "partition": 0} for _ in range(10)))  # shifts dc2's p0
    produce(dc1.bootstrap, topic, ({"value": f"r{i}".encode(), "partition": i % 2} for i in range(300)))
    config = flow_config(dc1, dc2, tmp_path, name="proto-dc1-to-dc2", topics={"include": [topic.replace(".", r"\.")]},
                         offsets={"groups": {"include": ["proto-.*"]}})
    try:
        with running_flow(spark, config):
            assert run_member(dc1, group, topic, "commit", "0:40,1:77") == ["committed 0:40,1:77"]
            # the new protocol, not the classic one (listed once its coordinator has written the commit)
            assert wait_until(lambda: group_type(dc1, group) == "CONSUMER", 30), group_type(dc1, group)
            assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 2) == {0: 50, 1: 77}, 60), \
                committed(dc2.bootstrap, group, topic, 2)

            # a member on dc2 (the group failed over): a later commit on dc1 is not synced over it
            with staying(member(dc2, group, topic, "stay", "120")):
                assert wait_until(lambda: group_states(admin(dc2.bootstrap), [group])[group] == ("STABLE", 1), 60)
                assert run_member(dc1, group, topic, "commit", "0:60,1:90") == ["committed 0:60,1:90"]
                time.sleep(5)  # the flow translates within a second: it had its chance
                assert committed(dc2.bootstrap, group, topic, 2) == {0: 50, 1: 77}
            # once the member left, the group's next position on dc1 is synced again
            assert run_member(dc1, group, topic, "commit", "0:65,1:95") == ["committed 0:65,1:95"]
            assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 2) == {0: 75, 1: 95}, 60), \
                committed(dc2.bootstrap, group, topic, 2)

        # the application resumes on dc2 with the same protocol where the sync put it
        assert run_member(dc2, group, topic, "first", "2") == ["0:75", "1:95"]
    finally:
        for cluster in (dc1, dc2):
            delete_groups(cluster.bootstrap, [group])
            delete_topics(cluster.bootstrap, [topic])
