"""The shape of a production-like dev cluster (pure): its replication settings, where each node
listens, and that its nodes form one quorum under one cluster id."""

from __future__ import annotations

import pytest

from dr_stream.dev.cluster_commands import clusters_command
from dr_stream.dev.replicated_cluster import ReplicatedCluster, dev_clusters_of, replication_settings


def test_three_nodes_keep_three_replicas_and_take_writes_with_one_node_down():
    settings = replication_settings(3)
    assert settings["default.replication.factor"] == settings["offsets.topic.replication.factor"] == "3"
    assert settings["min.insync.replicas"] == settings["transaction.state.log.min.isr"] == "2"
    assert settings["unclean.leader.election.enable"] == "false"
    assert replication_settings(1)["min.insync.replicas"] == "1"
    assert replication_settings(5)["default.replication.factor"] == "3"


def test_node_one_keeps_the_bootstrap_port_and_every_node_votes_in_one_quorum(tmp_path):
    cluster = ReplicatedCluster("dc1", 19092, tmp_path / "dc1")
    nodes = cluster.nodes
    assert [n.port for n in nodes] == [19092, 19102, 19112] and cluster.bootstrap == "127.0.0.1:19092"
    assert cluster.all_bootstraps == "127.0.0.1:19092,127.0.0.1:19102,127.0.0.1:19112"
    assert {n.voters for n in nodes} == {((1, 19093), (2, 19103), (3, 19113))}
    assert [n.node_id for n in nodes] == [1, 2, 3]
    assert cluster.cluster_id() == cluster.cluster_id() == nodes[0].cluster_id()
    assert ("min.insync.replicas", "2") in nodes[2].overrides


def test_a_cluster_of_no_brokers_or_too_many_is_refused_with_its_alias():
    with pytest.raises(ValueError, match="dc2: --brokers 0: expected 1 to 5"):
        ReplicatedCluster("dc2", 29092, None, brokers=0)  # type: ignore[arg-type]


def test_down_and_status_follow_the_shape_that_runs_and_up_asked_for_three_gives_three(tmp_path):
    assert [type(c).__name__ for c in dev_clusters_of(None, tmp_path)] == ["LocalCluster", "LocalCluster"]
    three = dev_clusters_of(3, tmp_path)
    assert [(c.alias, c.port, c.brokers) for c in three] == [("dc1", 19092, 3), ("dc2", 29092, 3)]  # type: ignore
    assert clusters_command("status", three) == 1  # nothing runs
