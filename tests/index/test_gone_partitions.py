"""The offset index forgets a destination partition only once two looks in a row miss it, and
never on a listing that lacks the flow's own runs topic; the store then holds nothing of it."""

from __future__ import annotations

from dr_stream.index.gone_partitions import gone_partitions
from dr_stream.index.run_store import Run, RunStore

OWN = "__dr_stream_runs.f"
HELD = {("orders", 0), ("orders", 1), ("gone", 0)}


def test_a_partition_missed_once_is_not_gone_yet_and_missed_twice_is():
    listed = {OWN: 1, "orders": 2}
    gone, missed = gone_partitions(HELD, listed, OWN, set())
    assert (gone, missed) == (set(), {("gone", 0)})
    assert gone_partitions(HELD, listed, OWN, missed) == ({("gone", 0)}, {("gone", 0)})


def test_a_partition_back_on_the_second_look_stays():
    _, missed = gone_partitions(HELD, {OWN: 1, "orders": 2}, OWN, set())
    assert gone_partitions(HELD, {OWN: 1, "orders": 2, "gone": 1}, OWN, missed) == (set(), set())


def test_a_topic_with_fewer_partitions_loses_those_past_its_count():
    _, missed = gone_partitions(HELD, {OWN: 1, "orders": 1, "gone": 1}, OWN, set())
    assert missed == {("orders", 1)}


def test_a_listing_without_the_flows_own_topic_drops_nothing_and_forgets_no_earlier_miss():
    assert gone_partitions(HELD, {}, OWN, {("gone", 0)}) == (set(), {("gone", 0)})
    assert gone_partitions(HELD, {"orders": 2}, OWN, set()) == (set(), set())


def test_a_forgotten_partition_leaves_the_store_and_its_maps():
    store = RunStore([Run("c1", "gone", 0, "gone", 0, 0, 9, 0, 9), Run("c1", "orders", 0, "orders", 0, 0, 4, 0, 4)],
                     life_starts={("gone", 0): 0}, rewinds={("gone", 0): [(5, 5)]})
    assert store.forget({("gone", 0)}) == 1
    assert store.destinations() == {("orders", 0)}
    store.add(Run("c1", "gone", 0, "gone", 0, 0, 9, 0, 9))  # a topic of that name made again
    assert store.runs_of(("gone", 0, "gone", 0)) == [Run("c1", "gone", 0, "gone", 0, 0, 9, 0, 9)], \
        "the old topic's rewind no longer cuts the new topic's runs"


def test_a_key_whose_runs_retention_deleted_leaves_the_store():
    store = RunStore([Run("c1", "t", 0, "t", 0, 0, 9, 0, 9), Run("c1", "t", 1, "t", 1, 0, 9, 0, 9)])
    assert store.drop_deleted({("t", 0): 10}) == 1
    assert store.destinations() == {("t", 1)}
