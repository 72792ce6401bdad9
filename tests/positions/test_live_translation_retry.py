"""A translated position whose sync failed is synced again until it lands, even when the
consumer never commits again and the index never moves: the rule with a stand-in destination,
then against a real fresh cluster whose group coordinator is not available yet (the
translator is a stand-in in both: the position's translation is not what is tested)."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace

import pytest

from dr_stream.core.config import ClusterConfig
from dr_stream.core.policy import GroupFilter, TopicFilter
from dr_stream.dev.clusters import LocalCluster
from dr_stream.positions.consumer_timestamps import GroupCommit
from dr_stream.positions.group_sync import GroupSync, decide
from dr_stream.positions.live_translation import LiveTranslation
from dr_stream.positions.translation_rule import Translation
from tests.kafka_tools import committed, create_topic, wait_until


class _Translator:
    def translate(self, commits):
        return [Translation(c.group, c.topic, c.partition, c.offset, c.timestamp, c.topic, c.partition, c.offset + 5,
                            "exact", "", False, 0, 100, None, None, 0) for c in commits]


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


def loop(destination: _Destination, lines: list[str]) -> LiveTranslation:
    return LiveTranslation(ClusterConfig("src", "localhost:1"), _Translator(), None, destination,
                         GroupFilter(), TopicFilter((".*",)), log=lines.append, retry_s=0.0)


def commit(offset: int) -> tuple[bytes, bytes]:
    c = GroupCommit("app", "orders", 0, offset, 1000)
    return c.record_key(), c.record_value()


class _Topic:
    """`__consumer_timestamps` as the loop's consumer sees it: the records, then nothing."""

    def __init__(self, records):
        self.records = list(records)

    def consume(self, num_messages, timeout):
        out, self.records = [_Message(k, v) for k, v in self.records], []
        return out


class _Message:
    def __init__(self, key, value):
        self._key, self._value = key, value

    def key(self):
        return self._key

    def value(self):
        return self._value

    def error(self):
        return None


def test_a_sync_that_failed_is_retried_until_the_destination_takes_it():
    lines: list[str] = []
    destination = _Destination(refusals=2)
    translate = loop(destination, lines)
    topic = _Topic([commit(40)])
    for _ in range(4):
        translate.step(topic)
        time.sleep(0.01)  # a retry is due once as long as the failed round took has passed
    assert destination.offsets == {("app", "orders", 0): 45}
    assert destination.rounds == 3  # two refusals, one write; nothing after it landed
    assert lines == ["group app: offsets not synced: COORDINATOR_NOT_AVAILABLE (retried every 0 s)",
                     "group app: offsets synced again"]
    assert translate.totals["sync_failures"] == 2


def test_a_newer_position_replaces_the_one_whose_sync_failed():
    destination = _Destination(refusals=1)
    translate = loop(destination, [])
    for records in ([commit(40)], [commit(70)], []):
        translate.step(_Topic(records))
        time.sleep(0.01)
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


def test_a_round_that_fails_as_a_whole_translates_its_positions_next_round_though_their_records_are_read():
    destination = _Destination(refusals=0)
    translate = LiveTranslation(ClusterConfig("src", "localhost:1"), _FailsOnce(), None, destination, GroupFilter(),
                              TopicFilter((".*",)), retry_s=0.0)
    topic = _Topic([commit(40)])
    with pytest.raises(RuntimeError, match="NOT_LEADER"):
        translate.step(topic)
    assert topic.records == [] and destination.offsets == {}
    translate.step(topic)
    assert destination.offsets == {("app", "orders", 0): 45}


@pytest.fixture
def fresh(cluster_home):
    """A cluster started a moment ago whose group coordinator cannot come up: its offsets topic
    asks for two replicas of one broker, so every group request is refused with
    COORDINATOR_NOT_AVAILABLE until the broker is restarted with one (same directory and PID
    file: stopping this one stops the restarted one too). Describes timed out before a restart
    are also what made librdkafka abort the whole process (issue 4605) until GroupSync dropped
    an admin client whose describe timed out."""
    cluster = LocalCluster("fresh", 24592, cluster_home / "fresh",
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
    translate = LiveTranslation(ClusterConfig("src", "localhost:1"), _Translator(), None,
                              GroupSync(fresh.config, "retry-test", timeout_s=2.0), GroupFilter(),
                              TopicFilter((".*",)), log=lines.append, retry_s=0.5)
    translate.step(_Topic([commit(40)]))  # the one commit the group ever makes
    assert len(lines) == 1 and lines[0].startswith("group app: offsets not synced: "), lines
    assert lines[0] == ("group app: offsets not synced: group app: no coordinator answered its describe "
                        "within 2 s (retried every 0.5 s)"), lines[0]
    for _ in range(3):  # still refused: retried, and not said again
        time.sleep(0.6)
        translate.step(_Topic([]))
    assert len(lines) == 1, lines

    fresh.stop()
    healed = replace(fresh, overrides=())
    healed.start()
    assert wait_until(lambda: translate.step(_Topic([])) or committed(healed.bootstrap, "app", "orders", 1) == {0: 45},
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
    translate = LiveTranslation(ClusterConfig("src", "localhost:1"), _Slower(), None, _Destination(refusals=0),
                              GroupFilter(), TopicFilter((".*",)), retry_s=0.0,
                              on_round=lambda took, n, period: reported.append((took, period)))
    for offset in (40, 50, 60, 70):
        translate.step(_Topic([commit(offset)]))
    assert len(reported) == 4
    assert all(period >= took for took, period in reported), reported
