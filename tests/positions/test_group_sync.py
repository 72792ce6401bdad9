"""When a destination group may be written, and what each partition's action says."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import Consumer

from dr_stream.core.config import ClusterConfig
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.kafka.group_offsets import Committed
from dr_stream.kafka.group_offsets.consumer_groups import delete_group
from dr_stream.positions.group_sync import GroupsRead, GroupSync, decide, sync_translations
from dr_stream.positions.translation_rule import Translation
from tests.kafka_tools import admin, commit_groups, create_topic, delete_topics, group_positions, unique, wait_until

WANTED = {("t", 0): 100}


def action(state="EMPTY", current=None, force=False, dry_run=False, members=0):
    [found] = decide("g", state, members, current or {}, WANTED, force, dry_run)
    return found.action.text, found.wrote


@pytest.mark.parametrize("state", ["ABSENT", "EMPTY", "DEAD"])
def test_a_group_with_no_members_gets_the_offset(state):
    assert action(state) == ("committed", True)


@pytest.mark.parametrize("state", ["STABLE", "PREPARING_REBALANCE", "UNKNOWN"])
def test_a_group_running_on_the_destination_is_never_written_even_when_forced(state):
    found, wrote = action(state, members=2, force=True)
    assert found == f"skipped: group is {state} on the destination (2 members)"
    assert not wrote


def test_an_offset_already_there_is_unchanged():
    assert action(current={("t", 0): 100}) == ("unchanged", False)


def test_a_destination_ahead_is_not_rewound_unless_forced():
    assert action(current={("t", 0): 150}) == (
        "skipped: destination is ahead at 150; not rewound (--force rewinds)", False)
    assert action(current={("t", 0): 150}, force=True) == ("rewound (--force)", True)


def test_a_destination_behind_moves_forward_without_force():
    assert action(current={("t", 0): 50}) == ("committed", True)


def test_a_dry_run_says_what_it_would_do_and_writes_nothing():
    assert action(dry_run=True) == ("would commit", False)
    assert action(current={("t", 0): 150}, force=True, dry_run=True) == ("would rewind (--force)", False)


def test_each_wanted_partition_gets_its_own_action_in_order():
    actions = decide("g", "EMPTY", 0, {("t", 1): 9}, {("t", 1): 5, ("t", 0): 3})
    assert [(a.partition, a.current, a.action.text) for a in actions] == [
        (0, None, "committed"), (1, 9, "skipped: destination is ahead at 9; not rewound (--force rewinds)")]


def translation(group, partition, offset, note=""):
    return Translation(group=group, topic="t", partition=partition, source_offset=0, source_timestamp=-1,
                       dest_topic="t", dest_partition=partition, offset=offset, method="exact", note=note,
                       clamped=False, log_start=0, log_end=10, last_copied=None, source_log_end=None, translated_at=0)


class _Sync:
    """The destination as `sync_translations` sees it: one group refuses the write."""

    def __init__(self):
        self.calls = []

    def apply_many(self, wanted, force, dry_run, seen=None):
        out = {}
        for group, offsets in wanted.items():
            self.calls.append((group, offsets, force, dry_run))
            out[group] = (RuntimeError("COORDINATOR_NOT_AVAILABLE\ndetails") if group == "broken"
                          else decide(group, "EMPTY", 0, {}, offsets, force, dry_run))
        return out


def test_sync_translations_groups_by_group_reports_untranslated_and_survives_a_failing_group():
    sync = _Sync()
    actions = sync_translations(sync, [
        translation("a", 0, 5), translation("a", 1, 6), translation("broken", 0, 7),
        translation("c", 0, None, note="no index"),
    ], force=True)
    assert {key: found.text for key, found in actions.items()} == {
        ("a", "t", 0): "committed", ("a", "t", 1): "committed",
        ("broken", "t", 0): "failed: COORDINATOR_NOT_AVAILABLE",
        ("c", "t", 0): "skipped: not translated (no index)",
    }
    assert sync.calls[0] == ("a", {("t", 0): 5, ("t", 1): 6}, True, False)


def test_a_round_whose_read_ahead_failed_fails_each_of_its_groups_and_writes_nothing():
    sync = _Sync()
    seen: Future = Future()
    seen.set_exception(RuntimeError("COORDINATOR_LOAD_IN_PROGRESS"))
    actions = sync_translations(sync, [translation("a", 0, 5), translation("b", 0, 6)], seen=seen)
    assert {key: found.text for key, found in actions.items()} == {
        ("a", "t", 0): "failed: COORDINATOR_LOAD_IN_PROGRESS", ("b", "t", 0): "failed: COORDINATOR_LOAD_IN_PROGRESS"}
    assert sync.calls == []


class _InMemory:
    """The destination's groups as a sync's client sees them, in memory: every group EMPTY, with
    the offsets given; it records what each call asked."""

    def __init__(self, offsets=None):
        self.offsets = offsets or {}
        self.described: list[str] = []
        self.read: list[tuple[list[str], list]] = []
        self.commits: dict = {}

    def states(self, groups):
        self.described += sorted(groups)
        return {g: ("EMPTY", 0) for g in groups}

    def committed(self, groups, partitions=None):
        self.read.append((sorted(groups), partitions))
        return {g: dict(self.offsets.get(g, {})) for g in groups}

    def commit(self, offsets, metadata):
        self.commits.update(offsets)
        return {}

    def close(self):
        pass


def in_memory_sync(offsets=None) -> tuple[GroupSync, _InMemory]:
    sync, destination = GroupSync(ClusterContext(ClusterConfig("dst", "localhost:1")), "f"), _InMemory(offsets)
    sync._offsets = destination
    return sync, destination


def test_groups_read_ahead_are_not_described_again_and_the_others_are():
    sync, destination = in_memory_sync()
    seen = GroupsRead({"a": ("STABLE", 2)}, {})
    result = sync.apply_many({"a": {("t", 0): 5}, "b": {("t", 0): 6}}, seen=seen)
    assert destination.described == ["b"]
    assert [x.action.text for x in result["a"]] == ["skipped: group is STABLE on the destination (2 members)"]
    assert [x.action.text for x in result["b"]] == ["committed"]
    assert destination.commits == {"b": {("t", 0): 6}}


def test_the_offsets_of_inactive_groups_are_read_once_for_the_partitions_wanted_then_decided_on():
    sync, destination = in_memory_sync({"a": {("t", 0): Committed(9)}})
    result = sync.apply_many({"a": {("t", 0): 5}, "b": {("t", 1): 6}})
    assert destination.read == [(["a", "b"], [("t", 0), ("t", 1)])]
    assert [x.action.text for x in result["a"]] == ["skipped: destination is ahead at 9; not rewound (--force rewinds)"]
    assert destination.commits == {"b": {("t", 1): 6}}


def test_one_group_applied_raises_its_failure():
    sync, destination = in_memory_sync()
    destination.commit = lambda offsets, metadata: {g: RuntimeError("REBALANCE_IN_PROGRESS") for g in offsets}
    with pytest.raises(RuntimeError, match="REBALANCE_IN_PROGRESS"):
        sync.apply("a", {("t", 0): 5})


@pytest.mark.integration
@pytest.mark.parametrize("batched", [True, False], ids=["java-batched", "consumer-per-group"])
def test_a_round_writes_empty_and_absent_groups_leaves_a_consumed_one_and_never_rewinds(spark, dc1, batched):
    """Both ways a round reaches the destination (the flow's batched Java client, the commands'
    consumer per group) against a real broker: the rule `decide` states, applied."""
    topic = unique("sync.")
    empty, absent, ahead, consumed = (unique(f"sync-{kind}-") for kind in ("empty", "absent", "ahead", "live"))
    create_topic(dc1.bootstrap, topic, partitions=1)
    commit_groups(dc1.bootstrap, {empty: {(topic, 0): 1}, ahead: {(topic, 0): 50}})
    consumer = Consumer({"bootstrap.servers": dc1.bootstrap, "group.id": consumed})
    sync = GroupSync(ClusterContext(dc1.config), "f", batched=batched)
    try:
        consumer.subscribe([topic])
        assert wait_until(lambda: consumer.poll(0.2) is None and bool(consumer.assignment()), 30)
        result = sync.apply_many({g: {(topic, 0): 10} for g in (empty, absent, ahead, consumed)})
        actions = {g: [a.action.text for a in found] for g, found in result.items()}
        assert actions == {empty: ["committed"], absent: ["committed"],
                           ahead: ["skipped: destination is ahead at 50; not rewound (--force rewinds)"],
                           consumed: ["skipped: group is STABLE on the destination (1 members)"]}
        assert {g: p for g, p in group_positions(dc1.bootstrap, [empty, absent, ahead]).items()} == {
            empty: {(topic, 0): 10}, absent: {(topic, 0): 10}, ahead: {(topic, 0): 50}}
    finally:
        consumer.close()
        sync.close()
        for group in (empty, absent, ahead, consumed):
            delete_group(admin(dc1.bootstrap), group)
        delete_topics(dc1.bootstrap, [topic])
