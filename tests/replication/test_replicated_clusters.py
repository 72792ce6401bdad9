"""The faults of a datacenter on production-shaped clusters (`dev up --brokers 3`: three KRaft
nodes each, replication factor 3, `min.insync.replicas` 2): the source's partition leader killed
with -9 mid-copy, then every destination node restarted one after the other while records keep
coming. Every record is copied exactly once and in order, and a group's position is synced exactly.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from dr_stream.dev.processes import stop_pids
from dr_stream.dev.replicated_cluster import ReplicatedCluster
from tests.clusters import worker_port
from tests.flows import flow_config, running_flow
from tests.kafka_tools import (
    admin,
    commit_groups,
    consume_all,
    count,
    create_topic,
    delete_groups,
    group_positions,
    produce,
    topic_config,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration

# Writes go on, 800 a second, until both faults are over (and at least 24,000 are written), so
# both land mid-copy however long the flow takes to start; at most 5 minutes of them.
AT_LEAST, AT_MOST, CHUNK, PAUSE_S = 24_000, 240_000, 800, 1.0


@pytest.fixture(scope="module")
def replicated(cluster_home):
    clusters = [ReplicatedCluster("dc1", worker_port(17092), cluster_home / "replicated-dc1"),
                ReplicatedCluster("dc2", worker_port(18092), cluster_home / "replicated-dc2")]
    try:
        for cluster in clusters:  # all six nodes start side by side
            cluster.launch()
        for cluster in clusters:
            cluster.wait_ready()
        yield clusters
    finally:  # every node at once
        stop_pids([node.pid_file for cluster in clusters for node in cluster.nodes], 30)


def leader(cluster: ReplicatedCluster, topic: str, partition: int) -> int:
    return admin(cluster.all_bootstraps).list_topics(topic, timeout=10).topics[topic].partitions[partition].leader


def fully_replicated(cluster: ReplicatedCluster) -> bool:
    """Every partition of every topic has all its replicas in sync: the next node may be restarted."""
    topics = admin(cluster.all_bootstraps).list_topics(timeout=10).topics.values()
    return all(len(p.isrs) == len(p.replicas) == cluster.brokers for t in topics for p in t.partitions.values())


@contextmanager
def _stopped_at_exit(writer: threading.Thread, given_up: threading.Event) -> Iterator[None]:
    try:
        yield
    finally:
        given_up.set()
        if writer.is_alive():
            writer.join(timeout=150)


def test_a_killed_source_leader_and_a_rolling_restart_of_the_destination_lose_and_repeat_nothing(
        spark, replicated, tmp_path):
    dc1, dc2 = replicated
    topic, group = unique("ha."), unique("ha-app-")
    create_topic(dc1.all_bootstraps, topic, 3)
    assert topic_config(dc1.all_bootstraps, topic)["min.insync.replicas"] == "2"
    config = flow_config(dc1, dc2, tmp_path, name="replicated-dc1-to-dc2",
                         topics={"include": [topic.replace(".", r"\.")]})

    # a test that fails stops its writer, which would otherwise outlive the clusters and fail a later test
    given_up, faults_over = threading.Event(), threading.Event()
    written: list[int] = []

    def paced():
        for i in range(AT_MOST):
            if i and i % CHUNK == 0:
                time.sleep(PAUSE_S)
            if given_up.is_set() or (faults_over.is_set() and i >= AT_LEAST and i % 3 == 0):
                written.append(i)
                return
            yield {"value": f"{i:07d}".encode(), "partition": i % 3}
        written.append(AT_MOST)

    writer = threading.Thread(target=produce, args=(dc1.all_bootstraps, topic, paced()),
                              kwargs={"enable.idempotence": True}, daemon=True)

    def copied() -> int:
        return count(dc2.all_bootstraps, topic) if topic in admin(dc2.all_bootstraps).list_topics(
            timeout=10).topics else 0

    with running_flow(spark, config), _stopped_at_exit(writer, given_up):
        writer.start()
        assert wait_until(lambda: copied() >= 2_000, 90), copied()
        # the source's leader of partition 0 dies mid-copy; the partition moves to another node
        killed = dc1.node(leader(dc1, topic, 0))
        assert writer.is_alive()
        os.kill(killed.pid() or 0, signal.SIGKILL)
        assert wait_until(lambda: leader(dc1, topic, 0) not in (killed.node_id, -1), 30)
        killed.start()
        # the destination restarted node by node, each once the others are in sync again
        assert writer.is_alive()
        for node in dc2.nodes:
            assert wait_until(lambda: fully_replicated(dc2), 90), f"dc2 not in sync before node {node.node_id}"
            node.stop()
            node.start()
        faults_over.set()
        writer.join(timeout=120)
        assert not writer.is_alive()
        [total] = written
        assert wait_until(lambda: copied() >= total, 120), copied()
        # dc2's copies sit at dc1's offsets (nothing else writes there), so a synced position is the same offset
        commit_groups(dc1.all_bootstraps, {group: {(topic, p): 5_000 + p for p in range(3)}})
        assert wait_until(lambda: group_positions(dc2.all_bootstraps, [group]).get(group) ==
                          {(topic, p): 5_000 + p for p in range(3)}, 60), group_positions(dc2.all_bootstraps, [group])

    copies = consume_all(dc2.all_bootstraps, topic)
    seen = Counter(r.value for r in copies)
    assert len(seen) == total and set(seen.values()) == {1}, Counter(seen.values())
    for p in range(3):
        values = [int(r.value) for r in copies if r.partition == p]
        assert values == sorted(values) == list(range(p, total, 3))
    delete_groups(dc1.all_bootstraps, [group])
    delete_groups(dc2.all_bootstraps, [group])

