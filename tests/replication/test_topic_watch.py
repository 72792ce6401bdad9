"""When the replicate query must restart to cover the source as it now stands (pure)."""

from __future__ import annotations

from dr_stream.replication.topic_watch import Subscription, restart_reason

RUNNING = Subscription(frozenset({"orders"}), 6, 1_048_588)


def test_nothing_runs_yet_so_nothing_restarts():
    assert restart_reason(None, {"orders": 6, "new": 1}, 1_048_588, realtime=False) is None


def test_a_new_source_topic_restarts_the_query_to_subscribe_to_it():
    assert restart_reason(RUNNING, {"orders": 6, "payments": 3}, 1_048_588, False) == "new source topics ['payments']"


def test_new_partitions_restart_only_a_real_time_query():
    assert restart_reason(RUNNING, {"orders": 8}, 1_048_588, realtime=False) is None
    assert restart_reason(RUNNING, {"orders": 8}, 1_048_588, realtime=True) == "source partitions 6 -> 8"


def test_a_topic_allowing_larger_records_than_the_sink_was_sized_for_restarts_it():
    assert restart_reason(RUNNING, {"orders": 6}, 1_048_588, False) is None
    assert "max.message.bytes is now 8000000" in restart_reason(RUNNING, {"orders": 6}, 8_000_000, False)
