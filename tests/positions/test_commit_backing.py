"""A position read from `__consumer_timestamps` counts once a commit on the source backs it (pure,
and through the live translation with a stand-in destination)."""

from __future__ import annotations

import time

from dr_stream.positions.commit_backing import CommitBacking
from dr_stream.positions.consumer_timestamps import GroupCommit
from dr_stream.positions.gone_positions import SourceGroups
from tests.positions.test_live_translation_retry import _Destination, loop


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def at(offset: int, group: str = "app", partition: int = 0) -> GroupCommit:
    return GroupCommit(group, "orders", partition, offset, 1000)


def test_a_position_at_or_below_what_the_source_committed_is_backed_and_one_above_is_held():
    backing = CommitBacking()
    backing.committed([at(40)])
    assert backing.backed([at(40), at(30, partition=1)]) == [at(40)]
    assert backing.holding == 1
    assert backing.backed([at(41)]) == [] and backing.holding == 2


def test_a_held_position_is_released_once_a_commit_reaches_it_and_only_the_newest_per_key_is_kept():
    backing = CommitBacking()
    assert backing.backed([at(50)]) == [] and backing.backed([at(60)]) == []
    backing.committed([at(55)])
    assert backing.released() == []
    backing.committed([at(60)])
    assert backing.released() == [at(60)] and backing.holding == 0


def test_a_backed_position_replaces_a_held_older_one():
    backing = CommitBacking()
    backing.backed([at(90)])
    backing.committed([at(70)])
    assert backing.backed([at(70)]) == [at(70)]
    assert backing.holding == 0 and backing.released() == []


def test_a_position_held_past_the_grace_is_said_once_with_the_highest_commit_and_dropped_at_expiry():
    clock = _Clock()
    backing = CommitBacking(grace_s=30, expire_s=100, clock=clock)
    backing.committed([at(10)])
    backing.backed([at(500)])
    clock.now = 40
    assert backing.overdue() == []  # the poller has not read every group yet: it may not have seen the commit
    clock.now = 5
    backing.source_read()
    clock.now = 34
    assert backing.overdue() == []
    clock.now = 35
    assert backing.overdue() == [(at(500), 10)]
    backing.backed([at(600)])  # a newer forged one: held since the first, not said again
    assert backing.overdue() == []
    assert backing.expired() == 0
    clock.now = 100
    assert backing.expired() == 1 and backing.holding == 0


def test_a_forgotten_position_leaves_nothing_behind():
    backing = CommitBacking()
    backing.committed([at(10)])
    backing.backed([at(20)])
    backing.forget({("app", "orders", 0)})
    assert backing.holding == 0 and backing.backed([at(5)]) == []


def test_a_forged_record_ahead_of_every_commit_moves_no_destination_group_until_the_source_commits_there():
    destination, lines = _Destination(refusals=0), []
    translate = loop(destination, lines, backing=CommitBacking(grace_s=0))
    translate.offer([at(40)])  # the poller read the group's commit
    translate.step()
    assert destination.offsets[("app", "orders", 0)] == 45
    translate.take_batch([at(900)])  # a record no commit stands behind
    translate.source_groups(SourceGroups({"app": frozenset({("orders", 0)})}, frozenset(), time.monotonic()))
    translate.step()
    assert destination.offsets[("app", "orders", 0)] == 45
    assert lines == ["group app: __consumer_timestamps says orders[0] is at 900, but no commit on the source reached "
                     "it for 0 s (highest seen: 40): not translated (a forged or stale record, or a group the flow "
                     "may not describe); taken once the group commits there"]
    assert translate.totals["unbacked"] == 1
    translate.take_batch([at(950, group="never-committed")])
    translate.step()
    assert ("never-committed", "orders", 0) not in destination.offsets
    translate.offer([at(900)])  # the group does commit there
    translate.step()
    assert destination.offsets[("app", "orders", 0)] == 905


def test_what_is_held_is_bounded_by_the_groups_the_source_holds_offsets_for():
    clock = _Clock()
    backing = CommitBacking(grace_s=30, clock=clock)
    backing.backed([at(500, group="ghost-1"), at(500, group="ghost-2"), at(500, group="app"),
                    at(500, group="unreadable")])
    clock.now = 10
    backing.backed([at(500, group="new-app")])  # its commit may not be in a read this young yet
    read = SourceGroups({"app": frozenset({("orders", 0)}), "ghost-2": frozenset({("orders", 1)})},
                        frozenset({"unreadable"}), taken_at=29)
    assert backing.not_live(read) == 0  # nothing was held a whole grace before the read was taken
    read = SourceGroups(read.offsets, read.unread, taken_at=30)
    assert backing.not_live(read) == 2  # ghost-1 holds nothing; ghost-2 holds another partition
    assert backing.holding == 3  # app (its group holds the partition), unreadable (not read), new-app (young)
    read = SourceGroups(read.offsets, read.unread, taken_at=40)
    assert backing.not_live(read) == 1 and backing.holding == 2


def test_dropped_positions_are_said_and_counted_for_the_metrics():
    destination, lines, dropped = _Destination(refusals=0), [], []
    translate = loop(destination, lines, backing=CommitBacking(grace_s=0), on_unbacked_dropped=dropped.append)
    translate.take_batch([at(950, group="never-committed"), at(951, group="never-committed", partition=1)])
    translate.source_groups(SourceGroups({"app": frozenset({("orders", 0)})}, frozenset(), time.monotonic()))
    translate.step()
    assert dropped == [2] and translate.totals["unbacked_dropped"] == 2
    assert translate.backing is not None and translate.backing.holding == 0
    assert lines[-1] == ("__consumer_timestamps: 2 unbacked positions dropped: their groups hold no committed offset "
                         "on those partitions 0 s after they were read")
    assert destination.offsets == {}
