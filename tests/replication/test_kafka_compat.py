"""Kafka 3.9 brokers still work with dr-stream, whose tests and dev clusters run Kafka 4.x: a flow
out of a 3.9 cluster copies, translates and syncs a group exactly into a 4.x one, and back."""

from __future__ import annotations

import pytest

from dr_stream.operations.failover import failover
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.runtime.jvm import kafka_classpath
from tests.flows import flow_config, running_flow
from tests.kafka_tools import (
    committed,
    consume_and_commit,
    count,
    create_topic,
    delete_groups,
    delete_topics,
    produce,
    provenance,
    resume_as_group,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration


def broker_version(cluster) -> str:
    """The version of the jars the cluster's broker runs, from the kafka_2.13 jar on its classpath."""
    jar = next(j for j in kafka_classpath(cluster.compat).split(":") if "/kafka_2.13-" in j)
    return jar.rsplit("kafka_2.13-", 1)[1].removesuffix(".jar")


def test_the_clusters_run_kafka_4_and_the_compat_one_kafka_3_9(dc2, dc39):
    assert broker_version(dc2).startswith("4.") and broker_version(dc39).startswith("3.9")


@pytest.mark.parametrize("direction", ["3.9 -> 4.x", "4.x -> 3.9"])
def test_a_flow_between_kafka_3_9_and_4_copies_and_moves_a_group_exactly(spark, dc2, dc39, tmp_path, direction):
    source, destination = (dc39, dc2) if direction.startswith("3.9") else (dc2, dc39)
    topic, group = unique("compat."), unique("compat-app-")
    create_topic(source.bootstrap, topic, 2)
    create_topic(destination.bootstrap, topic, 2)
    produce(destination.bootstrap, topic, ({"value": b"local", "partition": i % 2} for i in range(20)))
    produce(source.bootstrap, topic, ({"value": f"r{i}".encode(), "partition": i % 2} for i in range(300)))
    config = flow_config(source, destination, tmp_path, name=f"compat-{source.alias}-to-{destination.alias}",
                         topics={"include": [topic.replace(".", r"\.")]},
                         offsets={"groups": {"include": ["compat-.*"]}})
    try:
        with running_flow(spark, config):
            assert wait_until(lambda: count(destination.bootstrap, topic) == 320, 120)
            consume_and_commit(source.bootstrap, topic, group, {0: 40, 1: 111}, helper=False)
            assert wait_until(lambda: len(committed(destination.bootstrap, group, topic, 2)) == 2, 60)
            moved = failover(config, FlowTables.of(config), group)
        assert {(p.translation.method, p.action.text) for p in moved.rows} == {("exact", "unchanged")}
        first = {}
        for record in resume_as_group(destination.bootstrap, topic, group, 2):
            first.setdefault(record.partition, provenance(record)[0]["offset"])
        assert first == {0: 40, 1: 111}
    finally:
        for cluster in (source, destination):
            delete_groups(cluster.bootstrap, [group])
            delete_topics(cluster.bootstrap, [topic])
