"""The /healthz rule (pure)."""

from __future__ import annotations

from dr_stream.replication.health import QueryState, judge


def test_healthy_when_every_query_is_active_and_progressed_within_the_window_and_clusters_answer():
    health = judge(100.0, [QueryState("replicate-f", True, 95.0)], [], 10.0)
    assert health.ok and health.as_dict() == {"status": "ok", "reasons": []}


def test_each_reason_names_the_query_or_cluster():
    health = judge(100.0, [QueryState("replicate-f", True, 80.0), QueryState("other", False, 99.0)], ["dc2"], 10.0)
    assert not health.ok
    assert health.reasons == ("cluster dc2 does not answer",
                              "query replicate-f made no progress within 10 s (last: 20 s ago)",
                              "query other is not active")


def test_a_flow_whose_query_never_started_is_not_healthy():
    assert judge(1.0, [], [], 10.0).reasons == ("no query started yet",)
    assert not judge(1.0, [QueryState("q", True, None)], [], 10.0).ok
