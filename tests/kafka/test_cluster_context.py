"""A cluster's context: one admin client, one group-offsets face and one cluster.id per command."""

from __future__ import annotations

import pytest

from dr_stream.core.config import parse_flow
from dr_stream.kafka.cluster_context import ClusterContext, FlowClusters

CONFIG = parse_flow({"source": {"alias": "a", "bootstrap_servers": "127.0.0.1:1"},
                     "destination": {"alias": "b", "bootstrap_servers": "127.0.0.1:2"}}, "f.yaml")


def test_each_client_is_built_once_and_the_group_offsets_face_rides_on_the_same_admin():
    context = ClusterContext(CONFIG.source)
    try:
        admin = context.admin
        assert context.admin is admin
        assert context.group_offsets is context.group_offsets
        assert context.group_offsets.admin is admin
    finally:
        context.close()


def test_a_discarded_admin_is_replaced_for_everyone_and_a_closed_context_opens_nothing():
    context = ClusterContext(CONFIG.source)
    first = context.admin
    context.discard(first)
    assert context.admin is not first and context.group_offsets.admin is context.admin
    context.close()
    with pytest.raises(RuntimeError, match="cluster a: its context is closed"):
        _ = context.admin


def test_a_flows_pair_names_its_clusters_and_a_probe_answer_is_kept():
    with FlowClusters.of(CONFIG) as clusters:
        assert (clusters.source.alias, clusters.destination.alias) == ("a", "b")
        clusters.source.reached(None)  # as `unreachable` records a probe that found no answer
        assert clusters.source.reachable_id() is None


def test_a_client_asked_for_to_oneself_is_new_each_time_and_left_to_its_asker():
    context = ClusterContext(CONFIG.source)
    first, second = context.consumer("g"), context.consumer("g")
    assert first is not second and not first.opened  # built without connecting
    producer = context.producer({"linger.ms": 0})
    groups = context.groups_client()
    context.close()
    producer.produce("t", b"v")  # closing the context closed none of them: each is still usable
    producer.purge()
    producer.close()
    groups.close()
    for ask in (lambda: context.producer(), lambda: context.consumer("g"), lambda: context.groups_client()):
        with pytest.raises(RuntimeError, match="cluster a: its context is closed"):
            ask()
