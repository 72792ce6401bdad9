"""A translated position whose sync failed is synced again until it lands, even when the
consumer never commits again and the index never moves: the rule with a stand-in destination,
then against a real fresh cluster whose group coordinator is not available yet (the
translator and the translation log are stand-ins in both: the position's translation is not
what is tested). Positions arrive as the translate query's batches (`take_batch`); retries are
the step thread's."""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import replace

import pytest

from dr_stream.core.policy import GroupFilter, TopicFilter
from dr_stream.dev.clusters import LocalCluster
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.positions import live_translation
from dr_stream.positions.consumer_timestamps import GroupCommit
from dr_stream.positions.group_sync import GroupSync, decide
from dr_stream.positions.live_translation import LiveTranslation
from dr_stream.positions.translation_rule import Translation
from tests.clusters import worker_port
from tests.kafka_tools import committed, create_topic, wait_until


class _Translator:
    def translate(self, commits):
        return [Translation(group=c.group, topic=c.topic, partition=c.partition, source_offset=c.offset,
                            source_timestamp=c.timestamp, dest_topic=c.topic, dest_partition=c.partition,
                            offset=c.offset + 5, method="exact", note="", clamped=False, log_start=0, log_end=100,
                            last_copied=None, source_log_end=None, translated_at=0) for c in commits]


class _Destination:
    """Refuses the first `refusals` rounds (the group coordinator is still being elected)."""

    def __init__(self, refusals: int):
        self.refusals, self.rounds, self.offsets = refusals, 0, {}

    def read_ahead(self, groups):
        return None

    def apply_many(self, wanted, force, dry_run, seen=None):
        self.rounds += 1
        if self.rounds <= self.refusals:
            raise RuntimeError("COORDINATOR_NOT_AVAILABLE")
        out = {}
        for group, offsets in wanted.items():
            out[group] = decide(group, "EMPTY", 0, {}, offsets)
            self.offsets.update({(group, *k): o for k, o in offsets.items()})
        return out


class _Log:
    """The translation log: the rows each append was given."""

    def __init__(self):
        self.appends: list[list] = []

    def append(self, rows):
        self.appends.append(list(rows))


def loop(destination: _Destination, lines: list[str], translator=None, **more) -> LiveTranslation:
    """A translation whose batches' positions stand for commits the source made: holding them
    until the poller reads those commits is `test_commit_backing`'s."""
    more.setdefault("backing", None)
    return LiveTranslation(translator or _Translator(), _Log(), destination, GroupFilter(), TopicFilter((".*",)),
                           log=lines.append, retry_s=0.0, **more)


def commit(offset: int, partition: int = 0) -> GroupCommit:
    return GroupCommit("app", "orders", partition, offset, 1000)


def test_a_sync_that_failed_is_retried_until_the_destination_takes_it():
    lines: list[str] = []
    destination = _Destination(refusals=2)
    translate = loop(destination, lines)
    translate.take_batch([commit(40)])
    for _ in range(3):
        time.sleep(0.01)  # a retry is due once as long as the failed round took has passed
        translate.step()
    assert destination.offsets == {("app", "orders", 0): 45}
    assert destination.rounds == 3  # two refusals, one write; nothing after it landed
    assert lines == ["group app: offsets not synced: COORDINATOR_NOT_AVAILABLE (retried every 0 s)",
                     "group app: offsets synced again"]
    assert translate.totals["sync_failures"] == 2


def test_a_newer_position_replaces_the_one_whose_sync_failed():
    destination = _Destination(refusals=1)
    translate = loop(destination, [])
    translate.take_batch([commit(40)])
    translate.take_batch([commit(70)])
    time.sleep(0.01)
    translate.step()
    assert destination.offsets == {("app", "orders", 0): 75}
    assert destination.rounds == 2


class _FailsOnce(_Translator):
    """Fails its first round as a whole (a destination partition without its leader for a moment)."""

    def __init__(self):
        self.failed = False

    def translate(self, commits):
        if not self.failed:
            self.failed = True
            raise RuntimeError("NOT_LEADER_FOR_PARTITION")
        return super().translate(commits)


def test_a_batch_whose_round_fails_as_a_whole_fails_and_its_positions_are_translated_at_the_next_step():
    destination = _Destination(refusals=0)
    translate = loop(destination, [], translator=_FailsOnce())
    with pytest.raises(RuntimeError, match="NOT_LEADER"):
        translate.take_batch([commit(40)])
    assert destination.offsets == {}
    translate.step()
    assert destination.offsets == {("app", "orders", 0): 45}


def test_a_batch_run_again_after_it_failed_translates_its_positions_once():
    destination = _Destination(refusals=0)
    translate = loop(destination, [], translator=_FailsOnce())
    with pytest.raises(RuntimeError, match="NOT_LEADER"):
        translate.take_batch([commit(40)])
    translate.take_batch([commit(40)])  # the query runs the failed batch again from its checkpoint
    translate.step()
    assert destination.offsets == {("app", "orders", 0): 45} and destination.rounds == 1


@pytest.fixture
def fresh(cluster_home):
    """A cluster started a moment ago whose group coordinator cannot come up: its offsets topic
    asks for two replicas of one broker, so every group request is refused with
    COORDINATOR_NOT_AVAILABLE until the broker is restarted with one (same directory and PID
    file: stopping this one stops the restarted one too). Describes timed out before a restart
    are also what made librdkafka abort the whole process (issue 4605) until GroupSync dropped
    an admin client whose describe timed out."""
    cluster = LocalCluster("fresh", worker_port(24592), cluster_home / "fresh",
                           overrides=(("offsets.topic.replication.factor", "2"),))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.home, ignore_errors=True)


@pytest.mark.integration
def test_a_sync_refused_by_a_fresh_clusters_coordinator_lands_once_it_comes_up_without_a_new_commit(fresh):
    create_topic(fresh.bootstrap, "orders", partitions=1)
    lines: list[str] = []
    sync = GroupSync(ClusterContext(fresh.config), "retry-test", timeout_s=2.0)
    translate = LiveTranslation(_Translator(), _Log(), sync,
                                GroupFilter(), TopicFilter((".*",)), log=lines.append, retry_s=0.5, backing=None)
    translate.take_batch([commit(40)])  # the one commit the group ever makes
    assert len(lines) == 1 and lines[0].startswith("group app: offsets not synced: "), lines
    assert lines[0] == ("group app: offsets not synced: group app: no coordinator answered its describe "
                        "within 2 s (retried every 0.5 s)"), lines[0]
    for _ in range(3):  # still refused: retried, and not said again
        time.sleep(0.6)
        translate.step()
    assert len(lines) == 1, lines

    fresh.stop()
    healed = replace(fresh, overrides=())
    healed.start()
    assert wait_until(lambda: translate.step() or committed(healed.bootstrap, "app", "orders", 1) == {0: 45},
                      60), lines
    # Coming up, the coordinator may answer NOT_COORDINATOR for a moment: a new cause is said
    # once; the heal is said once, last.
    assert lines[-1] == "group app: offsets synced again", lines
    assert all(line.startswith("group app: offsets not synced: ") for line in lines[:-1]), lines
    assert len(lines) == len(set(lines)) <= 3, lines


class _Slower(_Translator):
    """Each round takes longer than the one before (a burst of commits arriving)."""

    def __init__(self):
        self.rounds = 0

    def translate(self, commits):
        self.rounds += 1
        time.sleep(0.05 * self.rounds)
        return super().translate(commits)


def test_each_rounds_reported_period_covers_that_round_even_when_rounds_grow_back_to_back():
    reported: list[tuple[float, float]] = []
    translate = loop(_Destination(refusals=0), [], translator=_Slower(),
                     on_round=lambda took, n, period: reported.append((took, period)))
    for offset in (40, 50, 60, 70):
        translate.take_batch([commit(offset)])
    assert len(reported) == 4
    assert all(period >= took for took, period in reported), reported


def _logged(offset: int, method: str, action: str, partition: int = 0) -> dict:
    """The translation log's newest row for one position, as `TranslationLog.latest` reads it."""
    return {"group": "app", "topic": "orders", "partition": partition, "source_offset": offset,
            "source_timestamp": 1000, "offset": offset + 5, "method": method, "note": "", "action": action}


def test_a_restart_takes_back_the_positions_left_not_final_or_not_synced_and_only_those():
    destination = _Destination(refusals=0)
    translate = loop(destination, [])
    due = translate.resume([_logged(10, "exact", "committed", partition=0),
                            _logged(20, "next", "committed", partition=1),
                            _logged(30, "exact", "failed: COORDINATOR_NOT_AVAILABLE", partition=2)])
    assert due == 2
    translate.step()
    assert destination.offsets == {("app", "orders", 1): 25, ("app", "orders", 2): 35}


def test_a_position_translated_as_the_log_already_says_is_not_logged_again():
    translate = loop(_Destination(refusals=0), [])
    translate.resume([_logged(10, "exact", "committed")])
    translate.take_batch([commit(11)])
    assert [[t.source_offset for t, _ in rows] for rows in translate.record.appends if rows] == [[11]]


def test_a_batch_returns_only_once_its_changed_translations_are_in_the_log():
    translate = loop(_Destination(refusals=0), [])
    changed = translate.take_batch([commit(40), commit(7, partition=1)])
    assert sorted(t.source_offset for t, _ in changed) == [7, 40]
    assert sorted(t.source_offset for t, _ in translate.record.appends[-1]) == [7, 40]


def test_malformed_records_of_a_batch_are_counted_and_said():
    lines: list[str] = []
    translate = loop(_Destination(refusals=0), lines)
    translate.take_batch([], malformed=2)
    translate.take_batch([], malformed=1)
    assert translate.totals["malformed"] == 3
    assert lines[-1] == "__consumer_timestamps: skipped 1 malformed records (3 so far)"


def test_the_step_thread_is_woken_by_a_hand_over_not_by_its_idle_wait(monkeypatch):
    monkeypatch.setattr(live_translation, "IDLE_WAIT_S", 60.0)
    destination = _Destination(refusals=0)
    translate = loop(destination, [])
    stop = threading.Event()
    thread = threading.Thread(target=translate.run, args=(stop,))
    thread.start()
    try:
        time.sleep(0.1)
        translate.offer([commit(40)])
        assert wait_until(lambda: destination.offsets == {("app", "orders", 0): 45}, 10, interval=0.01)
    finally:
        stop.set()
        translate.on_index_advanced()  # wakes it to see the stop
        thread.join(10)
    assert not thread.is_alive()


class _Occupied(_Destination):
    """A destination whose group has a member for the first `occupied` rounds (a failed-over
    application there), then none."""

    def __init__(self, occupied: int):
        super().__init__(refusals=0)
        self.occupied = occupied

    def apply_many(self, wanted, force, dry_run, seen=None):
        if self.rounds < self.occupied:
            self.rounds += 1
            return {group: decide(group, "STABLE", 1, {}, offsets) for group, offsets in wanted.items()}
        return super().apply_many(wanted, force, dry_run, seen)


def test_a_position_held_by_members_on_the_destination_is_synced_once_they_leave_without_a_new_commit():
    lines: list[str] = []
    destination = _Occupied(occupied=2)
    translate = loop(destination, lines, held_retry_s=0.0)
    translate.take_batch([commit(40)])
    assert destination.offsets == {}  # held: the group runs there
    for _ in range(3):  # no new position arrives: the held one is tried again
        translate.step()
    assert destination.offsets == {("app", "orders", 0): 45}
    assert destination.rounds == 3  # and not again once it landed
    translate.step()
    assert destination.rounds == 3


def test_a_held_position_is_tried_again_only_every_held_retry_period():
    destination = _Occupied(occupied=10)
    translate = loop(destination, [], held_retry_s=60.0)
    translate.take_batch([commit(40)])
    for _ in range(5):
        translate.step()
    assert destination.rounds == 1
