"""Scenario tests of exact offset translation and failover, on real brokers with a running flow.

One flow dc1 -> dc2 runs for the whole module (topics `xlate.*`, groups `xg-*`); each test uses
its own topics and groups. "Re-read" counts records a group reads again on dc2 that it had
consumed on dc1; "skipped" counts copied records it had not consumed and never reads on dc2.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace

import pytest
from confluent_kafka import Consumer, TopicPartition

from dr_stream.background import Background
from dr_stream.core.contracts import CONSUMER_TIMESTAMPS_TOPIC as CONSUMER_TIMESTAMPS
from dr_stream.core.contracts import position_key
from dr_stream.core.provenance import newest_entry
from dr_stream.operations.failover import failover, translate_positions
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.runtime.delta_reads import DeltaReads
from tests.flows import flow_config, flow_file, running_flow
from tests.kafka_tools import (
    committed,
    consume_all,
    consume_and_commit,
    create_on_both,
    create_topic,
    delete_groups,
    delete_records_before,
    delete_topics,
    end_offsets,
    forget_prefixed,
    group_state,
    produce,
    read_range,
    resume_as_group,
    stay_subscribed,
    topic_exists,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration


def records(n: int, partitions: int = 1):
    return ({"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % partitions} for i in range(n))


def resumed_origins(bootstrap: str, topic: str, group: str, partitions: int = 1) -> dict[int, list[int]]:
    return origins_of(resume_as_group(bootstrap, topic, group, partitions), partitions)


def origins_of(copies, partitions: int = 1) -> dict[int, list[int]]:
    """Per source partition, the origin offsets of the copies read (in their order)."""
    out: dict[int, list[int]] = {p: [] for p in range(partitions)}
    for r in copies:
        origin = newest_entry(r.headers, "__replicator_id")
        if origin:  # records produced on dc2 itself carry none
            out[origin["partition"]].append(origin["offset"])
    return out


def reread_and_skipped(resumed: list[int], committed_at: int, copied_end: int) -> tuple[int, int]:
    reread = sum(1 for o in resumed if o < committed_at) + (len(resumed) - len(set(resumed)))
    skipped = len(set(range(committed_at, copied_end)) - set(resumed))
    return reread, skipped


def copied_count(dc2, topic: str) -> int:
    return sum(high - low for low, high in end_offsets(dc2.bootstrap, topic).values())


def indexed_up_to(flow, topic: str, partition: int, origin_offset: int) -> bool:
    """The flow's index holds the copy of `origin_offset`: its run was published on the runs topic,
    which is where `failover` reads the runs the Delta table does not hold yet (the table takes
    them every 30 s; a test that reads the table itself writes it first)."""
    return flow.feed.last_copied().get((topic, partition), -1) >= origin_offset


@pytest.fixture(scope="module")
def mid_topic(dc1, dc2):
    """Source topic whose first 200 records retention already removed, and a destination that
    already held 300 records of its own: offsets differ by +100 between the clusters."""
    name = unique("xlate.mid.")
    create_topic(dc1.bootstrap, name, partitions=1)
    create_topic(dc2.bootstrap, name, partitions=1)
    produce(dc1.bootstrap, name, records(1000))
    delete_records_before(dc1.bootstrap, name, 0, 200)
    produce(dc2.bootstrap, name, ({"key": b"local", "value": f"dc2-{i}".encode(), "partition": 0} for i in range(300)))
    return name


@pytest.fixture(scope="module")
def flow(spark, dc1, dc2, tmp_path_factory, mid_topic):
    work = tmp_path_factory.mktemp("xlate")
    config = flow_config(dc1, dc2, work, topics={"include": [r"xlate\..*"]},
                         offsets={"groups": {"include": ["xg-.*"]}})
    with running_flow(spark, config) as running:
        yield running
    for cluster in (dc1, dc2):
        forget_prefixed(cluster.bootstrap, "xlate.", "xg-")


def wait_replicated(flow, dc2, topic: str, partition: int, origin_last: int, timeout: float = 120) -> None:
    assert wait_until(lambda: indexed_up_to(flow, topic, partition, origin_last), timeout, interval=1), (
        f"{topic}[{partition}] not copied and indexed up to origin offset {origin_last}")


def position(rows, group: str, partition: int = 0):
    found = [p for p in rows if p.translation.group == group and p.translation.partition == partition]
    assert len(found) == 1, f"expected one row for {group}[{partition}], got {rows}"
    return found[0]


@dataclass(frozen=True)
class Copied:
    """A topic of the module's flow, its records copied and indexed, and a group committed on dc1."""

    topic: str
    group: str

    def fail_over(self, config, **options):
        """`failover` for this group, with the flow's tables as they stand now."""
        return failover(config, FlowTables.of(config), self.group, **options)

    def row(self, config, **options):
        return position(self.fail_over(config, **options).rows, self.group)


def copied(flow, dc1, dc2, name: str, records_per_partition: int, commits: dict[int, int] | None = None,
           partitions: int = 1, helper: bool = True) -> Copied:
    """The scenario most tests start from: topic `xlate.<name>.*` with `records_per_partition`
    records in each partition, copied and indexed by the module's flow; group `xg-<name>-*`
    committed on dc1 at `commits` (through the client helper, or as a plain consumer)."""
    scenario = Copied(unique(f"xlate.{name}."), unique(f"xg-{name}-"))
    create_topic(dc1.bootstrap, scenario.topic, partitions=partitions)
    produce(dc1.bootstrap, scenario.topic, records(records_per_partition * partitions, partitions))
    for p in range(partitions):
        wait_replicated(flow, dc2, scenario.topic, p, records_per_partition - 1)
    if commits:
        consume_and_commit(dc1.bootstrap, scenario.topic, scenario.group, commits, helper=helper)
    return scenario


class TestWhitePaperCase:
    def test_group_committed_at_8000_of_10000_resumes_on_dc2_at_origin_8000(self, spark, flow, dc1, dc2):
        wp = copied(flow, dc1, dc2, "wp", 10_000, {0: 8000})

        row = wp.row(flow.config)

        assert row.translation.method == "exact"
        assert row.translation.source_offset == 8000
        assert row.translation.unreplicated == 0
        reread, skipped = reread_and_skipped(resumed_origins(dc2.bootstrap, wp.topic, wp.group)[0], 8000, 10_000)
        assert (reread, skipped) == (0, 0)

    def test_a_failover_asks_each_cluster_its_id_once_and_opens_one_admin_client_and_one_reader_per_cluster(
            self, spark, flow, dc1, dc2, monkeypatch):
        import threading
        from collections import Counter

        from dr_stream.kafka import clients

        once = copied(flow, dc1, dc2, "once", 100, {0: 60})
        opened: Counter = Counter()
        real_admin, real_probe = clients.admin, clients.probe_admin

        def ours() -> bool:  # the command's thread and its probes' pool, not the running flow's threads
            name = threading.current_thread().name
            return name == "MainThread" or name.startswith("ThreadPoolExecutor")

        def admin(cluster, settings=None):
            if ours() and not (settings or {}).get("error_cb"):
                opened[("admin", cluster.alias)] += 1
            return real_admin(cluster, settings)

        def probe_admin(cluster, on_error):
            if ours():
                opened[("cluster.id", cluster.alias)] += 1
            return real_probe(cluster, on_error)

        def consumer(cluster, group, settings=None):
            if ours():  # a group's own consumer reads or commits its offsets; every other read is the reader's
                opened[("consumer", cluster.alias, "of the group" if group == once.group else group)] += 1
            return real_consumer(cluster, group, settings)

        real_consumer = clients.consumer
        monkeypatch.setattr(clients, "admin", admin)
        monkeypatch.setattr(clients, "probe_admin", probe_admin)
        monkeypatch.setattr(clients, "consumer", consumer)
        row = once.row(flow.config)
        assert (row.translation.method, row.action.text) in {("exact", "committed"), ("exact", "unchanged")}
        assert {k: n for k, n in opened.items() if k[0] != "consumer" or k[2] != "of the group"} == {
            ("admin", "dc1"): 1, ("admin", "dc2"): 1, ("cluster.id", "dc1"): 1, ("cluster.id", "dc2"): 1,
            ("consumer", "dc1", "dr-stream-reader"): 1, ("consumer", "dc2", "dr-stream-reader"): 1}

    def test_two_records_never_replicated_are_reported_lost_and_the_rest_resume_exactly(
            self, spark, dc1, dc2, tmp_path):
        topic, group = unique("rpo."), unique("xg-rpo-")
        create_topic(dc1.bootstrap, topic, partitions=1)
        produce(dc1.bootstrap, topic, records(9998))
        config = flow_config(dc1, dc2, tmp_path, name="rpo", topics={"include": [r"rpo\..*"]},
                             offsets={"groups": {"include": [group]}})
        try:
            with running_flow(spark, config) as rpo_flow:
                wait_replicated(rpo_flow, dc2, topic, 0, 9997)
                consume_and_commit(dc1.bootstrap, topic, group, {0: 8000}, helper=True)
                assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 1).get(0) == 8000, 60), (
                    "the flow did not sync the translated offset to dc2")
            # the flow is down: dc1 keeps taking writes that never reach dc2
            produce(dc1.bootstrap, topic, ({"key": b"late", "value": b"late", "partition": 0} for _ in range(2)))

            result = Copied(topic, group).fail_over(config)

            assert result.source_reachable, result.origin
            row = position(result.rows, group)
            assert (row.translation.offset, row.translation.method) == (8000, "exact")
            assert row.translation.last_copied == 9997
            assert row.translation.unreplicated == 2
            reread, skipped = reread_and_skipped(resumed_origins(dc2.bootstrap, topic, group)[0], 8000, 9998)
            assert (reread, skipped) == (0, 0)

            # dc1 gone: the positions the flow recorded stand in for the live ones
            gone = replace(config, source=replace(config.source, bootstrap_servers="127.0.0.1:9"))
            result = Copied(topic, group).fail_over(gone)
            assert not result.source_reachable
            row = position(result.rows, group)
            assert (row.translation.source_offset, row.translation.offset) == (8000, 8000)
            assert row.action.text == "unchanged"
        finally:
            delete_topics(dc1.bootstrap, [topic])
            delete_topics(dc2.bootstrap, [topic])


class TestLagDistances:
    @pytest.mark.parametrize("behind", [0, 1_000, 100_000])
    def test_group_resumes_exactly_whatever_its_lag(self, spark, flow, dc1, dc2, lag_topic, behind):
        topic, total = lag_topic
        group = unique(f"xg-lag{behind}-")
        consume_and_commit(dc1.bootstrap, topic, group, {0: total - behind}, helper=True)

        row = Copied(topic, group).row(flow.config)

        assert row.translation.method == ("next" if behind == 0 else "exact")
        resumed = resumed_origins(dc2.bootstrap, topic, group)[0]
        assert reread_and_skipped(resumed, total - behind, total) == (0, 0)
        assert len(resumed) == behind


@pytest.fixture(scope="module")
def lag_topic(flow, dc1, dc2):
    topic, total = unique("xlate.lag."), 110_000
    create_topic(dc1.bootstrap, topic, partitions=1)
    produce(dc1.bootstrap, topic, records(total))
    wait_replicated(flow, dc2, topic, 0, total - 1, timeout=240)
    return topic, total


class TestDifferentOffsets:
    def test_offsets_shifted_by_retention_and_local_records_translate_exactly(self, spark, flow, dc1, dc2, mid_topic):
        wait_replicated(flow, dc2, mid_topic, 0, 999)
        group = unique("xg-mid-")
        consume_and_commit(dc1.bootstrap, mid_topic, group, {0: 250}, helper=True)

        row = Copied(mid_topic, group).row(flow.config)

        # dc2 held 300 records of its own; origin 200 landed at 300, so origin 250 is at 350
        assert (row.translation.source_offset, row.translation.offset) == (250, 350)
        resumed = resumed_origins(dc2.bootstrap, mid_topic, group)[0]
        assert reread_and_skipped(resumed, 250, 1000) == (0, 0)


class TestUnmodifiedConsumer:
    def test_plain_commits_are_polled_translated_and_synced_within_seconds(self, flow, dc1, dc2):
        plain = copied(flow, dc1, dc2, "plain", 1000, {0: 100, 1: 500, 2: 999}, partitions=3, helper=False)
        topic, group = plain.topic, plain.group
        committed_at = time.monotonic()

        assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 3) == {0: 100, 1: 500, 2: 999}, 60,
                          interval=0.2), committed(dc2.bootstrap, group, topic, 3)
        freshness = time.monotonic() - committed_at
        print(f"translation freshness (plain commit on dc1 -> offset on dc2): {freshness:.1f}s")
        for p, at in ((0, 100), (1, 500), (2, 999)):
            resumed = resumed_origins(dc2.bootstrap, topic, group, 3)[p]
            assert reread_and_skipped(resumed, at, 1000) == (0, 0)


class TestSyncRules:
    def test_a_group_active_on_dc2_is_not_overwritten(self, spark, flow, dc1, dc2):
        active = copied(flow, dc1, dc2, "active", 2000)
        topic, group = active.topic, active.group
        stop = threading.Event()
        member = Background(f"member of {group}", lambda: stay_subscribed(dc2.bootstrap, topic, group, stop)).start()
        try:
            assert wait_until(lambda: member.check() or group_state(dc2.bootstrap, group) == "STABLE", 60)
            consume_and_commit(dc1.bootstrap, topic, group, {0: 1500}, helper=True)

            row = active.row(flow.config)

            assert row.translation.offset == 1500
            assert row.action.text.startswith("skipped: group is STABLE")
            assert committed(dc2.bootstrap, group, topic, 1).get(0) != 1500
        finally:
            stop.set()
            member.join(timeout=30)

    def test_a_higher_dc2_offset_is_not_rewound_unless_forced(self, spark, flow, dc1, dc2):
        ahead = copied(flow, dc1, dc2, "ahead", 2000)
        topic, group = ahead.topic, ahead.group
        commit_plain(dc2.bootstrap, group, topic, 0, 1800)  # the group already got further on dc2
        consume_and_commit(dc1.bootstrap, topic, group, {0: 1000}, helper=True)

        row = ahead.row(flow.config)
        assert row.translation.offset == 1000
        assert row.action.text.startswith("skipped: destination is ahead at 1800")
        assert committed(dc2.bootstrap, group, topic, 1)[0] == 1800

        dry = ahead.row(flow.config, dry_run=True, force=True)
        assert dry.action.text == "would rewind (--force)"
        assert committed(dc2.bootstrap, group, topic, 1)[0] == 1800

        forced = ahead.row(flow.config, force=True)
        assert forced.action.text == "rewound (--force)"
        assert committed(dc2.bootstrap, group, topic, 1)[0] == 1000


class TestClamp:
    def test_an_index_pointing_past_the_destination_log_end_is_clamped_and_reported(self, spark, flow, dc1, dc2):
        clamp = copied(flow, dc1, dc2, "clamp", 500, {0: 300})
        topic, group = clamp.topic, clamp.group
        # dc2 loses the topic's data (recreated empty); the index still says origin 300 is at 300
        delete_topics(dc2.bootstrap, [topic])
        # the flow's topics loop may recreate it within a second, so "gone" alone can be missed between polls
        assert wait_until(lambda: gone_or_empty(dc2.bootstrap, topic), 30)
        try:
            create_topic(dc2.bootstrap, topic, partitions=1)
        except Exception as exc:  # the flow's topic sync may have recreated it first
            assert "TOPIC_ALREADY_EXISTS" in str(exc)
        assert wait_until(lambda: end_offsets(dc2.bootstrap, topic).get(0, (None, None))[1] == 0, 60)

        row = position(translate_positions(flow.config, FlowTables.of(flow.config), group).rows, group)

        assert row.translation.clamped
        assert row.translation.offset == 0
        assert "clamped 300 -> 0 (destination log end)" in row.translation.note


class TestTranslationLogCompaction:
    def test_a_running_flow_compacts_its_translation_log_to_one_row_per_position(self, flow, dc1, dc2):
        # no compaction on its own time while the rows to compact are written (it comes every minute)
        flow.translate_loop.compact_every_s = 3600.0
        moved = copied(flow, dc1, dc2, "compact", 100, {0: 10})
        def synced_at(offset: int) -> bool:
            return wait_until(lambda: committed(dc2.bootstrap, moved.group, moved.topic, 1).get(0) == offset, 60)

        for upto in (20, 30, 40):  # each move is a row of the log
            assert synced_at(upto - 10)
            consume_and_commit(dc1.bootstrap, moved.topic, moved.group, {0: upto}, helper=True)
        assert synced_at(40)
        path = flow.config.streaming.translations

        def rows() -> list[dict]:
            return DeltaReads(None).query(path, f"SELECT source_offset FROM t WHERE \"group\" = '{moved.group}'")

        assert wait_until(lambda: len(rows()) >= 4, 30), rows()
        flow.translate_loop.compact_every_s = 0.5
        try:
            assert wait_until(lambda: len(rows()) == 1, 60), rows()
        finally:
            flow.translate_loop.compact_every_s = 60.0
        assert rows() == [{"source_offset": 40}]
        assert moved.row(flow.config).translation.source_offset == 40


class TestGonePositions:
    def test_a_deleted_group_and_a_deleted_topic_leave_the_flow_its_metrics_and_its_translation_log(
            self, flow, dc1, dc2):
        kept = copied(flow, dc1, dc2, "gone-kept", 50, {0: 10})
        deleted = copied(flow, dc1, dc2, "gone-group", 50, {0: 20})
        dropped = copied(flow, dc1, dc2, "gone-topic", 50, {0: 30})
        scenarios = [(kept, 10), (deleted, 20), (dropped, 30)]
        for s, offset in scenarios:
            assert wait_until(lambda s=s, o=offset: committed(dc2.bootstrap, s.group, s.topic, 1).get(0) == o, 60)
        loop, poller = flow.translate_loop, flow.poller
        keys = {s.group: (s.group, s.topic, 0) for s, _ in scenarios}
        assert wait_until(lambda: all(k in poller.reported for k in keys.values()), 30)
        gone = {keys[deleted.group], keys[dropped.group]}
        path = flow.config.streaming.translations

        def logged() -> set[tuple]:
            names = ", ".join(f"'{group}'" for group in keys)
            return {(r["group"], r["topic"], r["partition"]) for r in DeltaReads(None).query(
                path, f'SELECT "group", topic, "partition" FROM t WHERE "group" IN ({names})')}

        assert wait_until(lambda: logged() == set(keys.values()), 30), logged()
        delete_groups(dc1.bootstrap, [deleted.group])
        delete_topics(dc1.bootstrap, [dropped.topic])
        loop.gone.after_s, poller.gone_check_s, loop.compact_every_s = 2.0, 0.5, 0.5
        try:
            assert wait_until(lambda: not gone & set(loop.latest), 60), sorted(gone & set(loop.latest))
            assert keys[kept.group] in loop.latest and not gone & set(poller.reported)
            assert deleted.group not in loop.untranslated_ages() and dropped.group not in loop.untranslated_ages()
            assert deleted.group not in poller._positions._topic.positions  # the reader's map follows the brokers
            assert loop.totals["forgotten"] >= 2
            assert wait_until(lambda: logged() == {keys[kept.group]}, 60), logged()
            # their records in __consumer_timestamps end in a tombstone, which compaction keeps alone
            assert wait_until(lambda: tombstoned(dc1.bootstrap, keys.values()) == gone, 60), \
                tombstoned(dc1.bootstrap, keys.values())
        finally:
            loop.gone.after_s, poller.gone_check_s, loop.compact_every_s = 600.0, 60.0, 60.0
        assert kept.row(flow.config).translation.source_offset == 10


def tombstoned(bootstrap: str, positions) -> set[tuple]:
    """Which of the positions' newest record in `__consumer_timestamps` is a tombstone."""
    newest = {r.key: r.value for r in consume_all(bootstrap, CONSUMER_TIMESTAMPS)}
    return {p for p in positions if position_key(*p) in newest and newest[position_key(*p)] is None}


class TestMalformedConsumerTimestamps:
    def test_malformed_records_are_counted_and_translation_goes_on(self, flow, dc1, dc2):
        before = flow.translate_loop.totals["malformed"]
        junk = [{"key": b"not json", "value": b"{}"},
                {"key": b'{"group":"xg-x","topic":"xlate.x","partition":0}', "value": b"oops"},
                {"key": b'{"group":"xg-x"}', "value": b'{"offset":5,"timestamp":1}'}]
        produce(dc1.bootstrap, CONSUMER_TIMESTAMPS, junk)
        junk = copied(flow, dc1, dc2, "junk", 100, {0: 40})
        topic, group = junk.topic, junk.group

        assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 1).get(0) == 40, 60)
        assert flow.translate_loop.totals["malformed"] - before == 3


def gone_or_empty(bootstrap: str, topic: str) -> bool:
    if not topic_exists(bootstrap, topic):
        return True
    try:
        return end_offsets(bootstrap, topic).get(0, (None, None))[1] == 0
    except Exception:  # a topic being deleted may answer with an error for a moment
        return False


def commit_plain(bootstrap: str, group: str, topic: str, partition: int, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        consumer.close()


class TestActiveActive:
    def test_records_the_flow_copied_translate_exactly_with_identical_topic_names(self, spark, flow, dc1, dc2,
                                                                                 tmp_path):
        topic, group = unique("xlate.aa."), unique("xg-aa-")
        create_on_both(dc1.bootstrap, dc2.bootstrap, topic, 1)  # the module's flow may make it on dc2 first
        back = flow_config(dc2, dc1, tmp_path, name="aa-back", topics={"include": [r"xlate\.aa\..*"]},
                           offsets={"groups": {"include": ["xg-aa-.*"]}})
        with running_flow(spark, back):
            for chunk in range(6):  # both sides write while both flows copy, so the logs interleave
                for cluster in (dc1, dc2):
                    produce(cluster.bootstrap, topic, ({"key": f"{cluster.alias}-{chunk}-{i}".encode(),
                                                        "value": b"x", "partition": 0} for i in range(500)))
                time.sleep(0.5)
            assert wait_until(lambda: copied_count(dc1, topic) == 6000 and copied_count(dc2, topic) == 6000, 120)
            local_on_dc1 = [r.offset for r in consume_all(dc1.bootstrap, topic)
                            if newest_entry(r.headers, "__replicator_id") is None]
            assert len(local_on_dc1) == 3000
            committed_at = local_on_dc1[len(local_on_dc1) // 2]  # mid-way through dc1's own records
            wait_replicated(flow, dc2, topic, 0, max(local_on_dc1))
            consume_and_commit(dc1.bootstrap, topic, group, {0: committed_at}, helper=True)

            row = Copied(topic, group).row(flow.config)

        assert row.translation.method == "exact"
        resumed = resumed_origins(dc2.bootstrap, topic, group)[0]
        expected = {o for o in local_on_dc1 if o >= committed_at}
        assert len(expected) == 1500
        assert sorted(resumed) == sorted(expected)  # each once: nothing re-read, nothing skipped


class TestNotebook:
    def test_offset_index_notebook_runs_against_this_run_and_its_hand_worked_translation_matches(
            self, flow, dc1, dc2, tmp_path):
        import os

        import nbformat
        from nbclient import NotebookClient

        from dr_stream.runtime.paths import project_root

        nb = copied(flow, dc1, dc2, "nb", 1000, {0: 600})
        topic, group = nb.topic, nb.group
        assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 1).get(0) == 600, 60)
        flow.feed.write()  # the notebook reads the Delta table as it stands
        config_file = flow_file(flow.config, tmp_path)
        notebook = nbformat.read(project_root() / "notebooks" / "offset_index.ipynb", as_version=4)
        os.environ["DR_STREAM_CONFIG"] = str(config_file)
        try:
            NotebookClient(notebook, timeout=300, kernel_name="python3",
                           resources={"metadata": {"path": str(project_root())}}).execute()
        finally:
            os.environ.pop("DR_STREAM_CONFIG", None)

        text = "\n".join(o.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                         for o in cell.get("outputs", []))
        assert "worked by hand: matches" in text
        assert "runs stand for" in text
        images = [o for cell in notebook.cells for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
        assert images, "the lag plot was not rendered"


class TestIndexUpkeep:
    def test_runs_merge_and_follow_the_destination_retention(self, spark, flow, dc1, dc2):
        topic = unique("xlate.keep.")
        create_topic(dc1.bootstrap, topic, partitions=1)
        for _ in range(3):  # three batches -> at least three runs before upkeep
            produce(dc1.bootstrap, topic, records(20_000))
            time.sleep(1.5)
        wait_replicated(flow, dc2, topic, 0, 59_999)
        mine = f"origin_topic = '{topic}'"

        flow.feed.write()
        flow.feed.maintain()
        runs = flow.index.runs().where(mine).collect()
        assert [(r.origin_start, r.origin_end, r.dest_start, r.dest_end) for r in runs] == [(0, 59_999, 0, 59_999)]
        size = flow.index.size_in_bytes()
        total = flow.index.runs().agg({"records": "sum"}).first()[0]
        print(f"offset index after upkeep: {size} bytes for {total} records "
              f"({size / total * 1e6:.0f} bytes per million replicated records)")

        delete_records_before(dc2.bootstrap, topic, 0, 60_000)  # retention removed every copy on dc2
        flow.feed.write()
        flow.feed.maintain()
        assert flow.index.runs().where(mine).count() == 0


class TestCommandLine:
    def test_failover_dry_run_status_and_reset_offsets_print_json(self, flow, dc1, dc2, tmp_path):
        import json
        import subprocess
        import sys

        cli_scenario = copied(flow, dc1, dc2, "cli", 500, {0: 123}, helper=False)
        topic, group = cli_scenario.topic, cli_scenario.group
        config_file = flow_file(flow.config, tmp_path, topics={"include": [r"xlate\..*"]},
                                offsets={"groups": {"include": ["xg-.*"]}, "sync_to_destination": False})

        def cli(*args: str) -> dict | list:
            done = subprocess.run([sys.executable, "-m", "dr_stream.cli", *args, "--config", str(config_file),
                                   "--json"], capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr[-2000:]
            return json.loads(done.stdout)

        out = cli("failover", "--group", group, "--dry-run")
        [row] = out["positions"]
        assert (row["source_offset"], row["offset"], row["method"]) == (123, 123, "exact")
        assert row["action"] in ("would commit", "unchanged")

        status = cli("status")
        mine = [p for p in status["replication"] if p["topic"] == topic]
        assert mine and mine[0]["lag_records"] == 0 and mine[0]["last_copied"] == 499

        reset = cli("reset-offsets", "--cluster", "dc2", "--group", unique("xg-reset-"), "--topic", topic,
                    "--to-datetime", "2000-01-01T00:00:00")
        assert [(a["partition"], a["offset"], a["action"]) for a in reset] == [(0, 0, "committed")]

    def test_a_flow_file_pointed_at_another_cluster_is_refused_by_every_command_and_moves_nothing(
            self, spark, flow, dc1, dc2, dc3, tmp_path):
        import subprocess
        import sys

        from dr_stream.core.config import load_flow
        from dr_stream.replication.flow import build_flow
        from dr_stream.runtime.recorded_clusters import RecordedClusters, WrongCluster

        scenario = copied(flow, dc1, dc2, "wrongcluster", 100, {0: 40}, helper=False)
        topic, group = scenario.topic, scenario.group
        create_topic(dc3.bootstrap, topic, partitions=1)
        produce(dc3.bootstrap, topic, records(100))  # dc3 could take the group's offsets if asked
        assert RecordedClusters.of(flow.config).ids() == {"source": dc1.cluster_id(), "destination": dc2.cluster_id()}
        sections = {"topics": {"include": [r"xlate\..*"]}, "offsets": {"groups": {"include": ["xg-.*"]}}}
        for name in ("right", "to-dc3", "from-dc3"):
            (tmp_path / name).mkdir()
        right = flow_file(flow.config, tmp_path / "right", **sections)
        # the flow file still says dc2, but the address is dc3's: an address that moved, a copied file
        wrong_destination = flow_file(replace(flow.config, destination=replace(flow.config.destination,
                                                                               bootstrap_servers=dc3.bootstrap)),
                                      tmp_path / "to-dc3", **sections)
        wrong_source = flow_file(replace(flow.config, source=replace(flow.config.source,
                                                                     bootstrap_servers=dc3.bootstrap)),
                                 tmp_path / "from-dc3", **sections)

        def cli(config_file: str, *args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "dr_stream.cli", *args, "--config", config_file],
                                  capture_output=True, text=True, timeout=300)

        refused = {
            "failover": cli(wrong_destination, "failover", "--group", group),
            "translate": cli(wrong_destination, "translate", "--group", group),
            "reset-offsets": cli(wrong_destination, "reset-offsets", "--cluster", "dc2", "--group", group,
                                 "--to-datetime", "2000-01-01T00:00:00"),
            "status": cli(wrong_destination, "status"),
            "skip": cli(wrong_destination, "skip", "--topic", topic, "--partition", "0", "--offset", "7"),
            "failover from dc3": cli(wrong_source, "failover", "--group", group),
        }
        for command, done in refused.items():
            role = "source" if command.endswith("dc3") else "destination"
            recorded = dc1.cluster_id() if role == "source" else dc2.cluster_id()
            file = wrong_source if role == "source" else wrong_destination
            assert done.returncode == 78, (command, done.stderr[-2000:])
            [line] = done.stderr.strip().splitlines()
            assert line.startswith(f"dr-stream: config error: {file}: {role}.bootstrap_servers: "), (command, line)
            assert dc3.cluster_id() in line and recorded in line, (command, line)
        assert committed(dc3.bootstrap, group, topic, 1) == {}, "a refused failover committed on dc3"

        with pytest.raises(WrongCluster, match=dc3.cluster_id()):
            wrong = build_flow(load_flow(wrong_destination), spark)
            try:
                wrong.connect()
            finally:
                wrong.clusters.close()

        done = cli(right, "failover", "--group", group, "--dry-run")
        assert done.returncode == 0, done.stderr[-2000:]
        forget_prefixed(dc3.bootstrap, "xlate.", "xg-")



class TestOffsetsKeptOutsideGroups:
    """`translate --offsets`: a Spark query's, Flink job's or custom consumer's own positions, in
    Spark's startingOffsets shape, through the CLI as written."""

    @staticmethod
    def cli(config_file, *args: str, stdin: str | None = None):
        import subprocess
        import sys

        return subprocess.run([sys.executable, "-m", "dr_stream.cli", "translate", "--config", str(config_file), *args],
                              capture_output=True, text=True, timeout=300, input=stdin)

    def test_an_applications_own_offsets_translate_in_sparks_shape_and_a_reader_resumes_from_them_exactly(
            self, flow, dc1, dc2, mid_topic, tmp_path):
        import json

        wait_replicated(flow, dc2, mid_topic, 0, 999)
        apps = copied(flow, dc1, dc2, "apps", 400, partitions=3)
        config_file = flow_file(flow.config, tmp_path, topics={"include": [r"xlate\..*"]},
                                offsets={"groups": {"include": ["xg-.*"]}})
        asked = {mid_topic: {"0": 250}, apps.topic: {"0": 100, "1": 400, "2": -2}}
        (tmp_path / "offsets.json").write_text(json.dumps(asked))

        done = self.cli(config_file, "--offsets", str(tmp_path / "offsets.json"))

        assert done.returncode == 0, done.stderr[-2000:]
        answer = json.loads(done.stdout)
        # dc2 held 300 records of its own before the copy of origin 200 (+100 there); the other
        # topic lines up; -2 (earliest) means the same on the destination
        assert answer == {mid_topic: {"0": 350}, apps.topic: {"0": 100, "1": 400, "2": -2}}
        # a reader on dc2 from the answer reads exactly what the application had not read
        resumed = origins_of(read_range(dc2.bootstrap, mid_topic, {0: 350}, end_offsets(dc2.bootstrap, mid_topic)))
        assert reread_and_skipped(resumed[0], 250, 1000) == (0, 0)
        resumed = origins_of(read_range(dc2.bootstrap, apps.topic, {0: 100, 1: 400},
                                        end_offsets(dc2.bootstrap, apps.topic)), 3)
        assert reread_and_skipped(resumed[0], 100, 400) == (0, 0)
        assert resumed[1] == []  # at its end: nothing left to read

        # the same from stdin with --json: each position's method and note
        done = self.cli(config_file, "--offsets", "-", "--json", stdin=json.dumps(asked))
        assert done.returncode == 0, done.stderr[-2000:]
        document = json.loads(done.stdout)
        assert document["offsets"] == answer and document["source_reachable"] is True
        methods = {(p["topic"], p["partition"]): (p["method"], p["exact"]) for p in document["positions"]}
        assert methods == {(mid_topic, 0): ("exact", True), (apps.topic, 0): ("exact", True),
                           (apps.topic, 1): ("next", True), (apps.topic, 2): ("earliest", True)}

    def test_a_flink_job_started_on_the_destination_from_the_translated_offsets_reads_exactly_the_rest(
            self, flow, dc1, dc2, mid_topic, tmp_path):
        import json

        from tests.probes import flink_classpath, probe, run_probe

        wait_replicated(flow, dc2, mid_topic, 0, 999)
        config_file = flow_file(flow.config, tmp_path, topics={"include": [r"xlate\..*"]},
                                offsets={"groups": {"include": ["xg-.*"]}})
        # the job had read dc1's records up to 249: its next offset there is 250
        done = self.cli(config_file, "--offsets", "-", stdin=json.dumps({mid_topic: {"0": 250}}))
        assert done.returncode == 0, done.stderr[-2000:]
        start = json.loads(done.stdout)[mid_topic]
        assert start == {"0": 350}  # dc2 held 300 records of its own before the copy of origin 200

        # Flink's KafkaSource, OffsetsInitializer.offsets(...) from the answer, bounded at dc2's end
        values = run_probe(probe("FlinkReader", flink_classpath(), dc2.bootstrap, mid_topic,
                                 ",".join(f"{p}:{o}" for p, o in start.items())))
        read = [int(v.removeprefix("v")) for v in values if v.startswith("v")]
        assert len(read) == len(values), "read a record dc2 holds of its own"
        reread = sum(1 for i in read if i < 250) + len(read) - len(set(read))
        skipped = len(set(range(250, 1000)) - set(read))
        assert (reread, skipped) == (0, 0) and read == list(range(250, 1000))

    def test_offsets_not_from_this_flows_source_are_refused_in_one_line(self, flow, dc1, dc2, mid_topic, tmp_path):
        import json

        wait_replicated(flow, dc2, mid_topic, 0, 999)
        config_file = flow_file(flow.config, tmp_path, topics={"include": [r"xlate\..*"]},
                                offsets={"groups": {"include": ["xg-.*"]}})
        beyond = self.cli(config_file, "--offsets", "-", stdin=json.dumps({mid_topic: {"0": 5000}}))
        assert beyond.returncode == 64 and beyond.stdout == "", beyond.stderr[-2000:]
        assert beyond.stderr.strip().splitlines() == [
            f"dr-stream: translate: offsets on stdin: {mid_topic}[0]: offset 5000 is beyond the source's log end 1000: "
            "these offsets are not from this flow's source"]
        other = self.cli(config_file, "--offsets", "-", stdin=json.dumps({"orders": {"0": 1}}))
        assert other.returncode == 64 and other.stderr.strip().splitlines() == [
            "dr-stream: translate: offsets on stdin: topic 'orders' is not one this flow copies (its topics filter)"]
        malformed = self.cli(config_file, "--offsets", "-", stdin="{")
        assert malformed.returncode == 64 and len(malformed.stderr.strip().splitlines()) == 1, malformed.stderr
