"""What one poller round reports, from a batched fetch (pure: no cluster)."""

from __future__ import annotations

from dr_stream.core.policy import TopicFilter
from dr_stream.kafka.group_offsets import Committed, GroupOffsetsError
from dr_stream.positions.consumer_timestamps import GroupCommit
from dr_stream.positions.poller import moved_commits

TOPICS = TopicFilter(("orders",), ())


def test_only_positions_that_moved_on_replicated_topics_are_reported():
    fetched = {"app": {("orders", 0): Committed(10), ("orders", 1): Committed(4), ("audit", 0): Committed(3)}}
    moved, failed = moved_commits(fetched, TOPICS, {("app", "orders", 1): 4})
    assert moved == [GroupCommit("app", "orders", 0, 10)]
    assert failed == {}


def test_a_position_dr_stream_wrote_is_never_echoed_back():
    fetched = {"app": {("orders", 0): Committed(10, "dr-stream:other-way")}}
    assert moved_commits(fetched, TOPICS, {}) == ([], {})


def test_a_group_whose_fetch_failed_is_reported_as_failed_not_as_having_no_offsets():
    error = GroupOffsetsError("CoordinatorNotAvailableException")
    moved, failed = moved_commits({"app": error, "ok": {("orders", 0): Committed(1)}}, TOPICS, {})
    assert failed == {"app": error}
    assert moved == [GroupCommit("ok", "orders", 0, 1)]
