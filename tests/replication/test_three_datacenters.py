"""Three datacenters: a chain (dc1 -> dc2 -> dc3) that moves a dc1 group to dc3 exactly, and a
three-way active-active mesh where every record reaches every cluster once and nothing loops."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from dr_stream.operations.failover import failover
from dr_stream.operations.flow_tables import FlowTables
from tests.flows import flow_config, running_flow
from tests.kafka_tools import (
    committed,
    consume_all,
    consume_and_commit,
    count,
    create_topic,
    delete_groups,
    produce,
    provenance,
    resume_as_group,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration


def test_a_dc1_group_fails_over_to_dc3_through_the_chain_exactly(spark, dc1, dc2, dc3, topics, tmp_path):
    topic, group = unique("chain."), unique("chain-app-")
    topics.append(topic)
    for cluster, local in ((dc1, 0), (dc2, 30), (dc3, 70)):  # each cluster's offsets differ from the others'
        create_topic(cluster.bootstrap, topic, 2)
        produce(cluster.bootstrap, topic, ({"value": b"local", "partition": i % 2} for i in range(local)))
    produce(dc1.bootstrap, topic, ({"value": f"r{i}".encode(), "partition": i % 2} for i in range(400)))
    selected = {"topics": {"include": [topic.replace(".", r"\.")]}, "offsets": {"groups": {"include": ["chain-.*"]}}}
    first = flow_config(dc1, dc2, tmp_path, name="chain-dc1-to-dc2", **selected)
    second = flow_config(dc2, dc3, tmp_path, name="chain-dc2-to-dc3", **selected)
    try:
        with running_flow(spark, first), running_flow(spark, second):
            assert wait_until(lambda: count(dc3.bootstrap, topic) == 70 + 30 + 400, 120)  # dc2's own too
            consume_and_commit(dc1.bootstrap, topic, group, {0: 123, 1: 77}, helper=False)
            # dc1 -> dc2 syncs the group to dc2; dc2 -> dc3 passes that position on
            assert wait_until(lambda: len(committed(dc3.bootstrap, group, topic, 2)) == 2, 60), \
                committed(dc2.bootstrap, group, topic, 2)
            moved = failover(second, FlowTables.of(second), group)
        assert {(p.translation.partition, p.translation.method, p.action.text) for p in moved.rows} == {
            (0, "exact", "unchanged"), (1, "exact", "unchanged")}

        resumed = resume_as_group(dc3.bootstrap, topic, group, 2)
        first_read = {}
        for record in resumed:
            first_read.setdefault(record.partition, provenance(record)[0]["offset"])
        assert first_read == {0: 123, 1: 77}, "each partition resumes at the dc1 record the group had not read"
        assert len(resumed) == (200 - 123) + (200 - 77)
        assert all([h["cluster"] for h in provenance(r)] == [dc1.cluster_id(), dc2.cluster_id()] for r in resumed)
    finally:
        for cluster in (dc1, dc2, dc3):
            delete_groups(cluster.bootstrap, [group])


def _mesh(dc1, dc2, dc3, tmp_path, topic: str):
    """The six flows of a three-way mesh: each copies only its source's own records."""
    options = {"topics": {"include": [topic.replace(".", r"\.")]}, "offsets": {"translate": False},
               "provenance": {"forward": False}, "streaming": {"trigger": "1s"}}
    clusters = (dc1, dc2, dc3)
    return [flow_config(a, b, tmp_path, name=f"mesh-{a.alias}-to-{b.alias}", **options)
            for a in clusters for b in clusters if a is not b]


def test_a_three_way_mesh_copies_every_record_to_every_cluster_once_and_nothing_loops(
        spark, dc1, dc2, dc3, topics, tmp_path):
    topic = unique("mesh.")
    topics.append(topic)
    clusters = (dc1, dc2, dc3)
    for cluster in clusters:
        create_topic(cluster.bootstrap, topic, 1)
    flows = _mesh(dc1, dc2, dc3, tmp_path, topic)
    with running_flow(spark, flows[0]), running_flow(spark, flows[1]), running_flow(spark, flows[2]), \
            running_flow(spark, flows[3]), running_flow(spark, flows[4]), running_flow(spark, flows[5]):
        for round_ in range(3):  # while the flows run, so records cross each other
            for cluster in clusters:
                produce(cluster.bootstrap, topic, ({"value": f"{cluster.alias}-{round_}-{i}".encode()}
                                                   for i in range(50)))
            time.sleep(1)
        total = 3 * 3 * 50
        assert wait_until(lambda: all(count(c.bootstrap, topic) >= total for c in clusters), 120), \
            [count(c.bootstrap, topic) for c in clusters]
        time.sleep(5)  # several more triggers of every flow: a loop would show as growth
        stable = [count(c.bootstrap, topic) for c in clusters]

    assert stable == [total, total, total]
    ids = {c.alias: c.cluster_id() for c in clusters}
    for cluster in clusters:
        records = consume_all(cluster.bootstrap, topic)
        assert set(Counter(r.value for r in records).values()) == {1}, "every record exactly once"
        for r in records:
            origin = r.value.decode().split("-")[0]
            hops = [h["cluster"] for h in provenance(r)]
            assert hops == ([] if origin == cluster.alias else [ids[origin]]), "straight from its origin"
