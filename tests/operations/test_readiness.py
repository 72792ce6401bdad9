"""The drill's rules: each check from plain values, a failure naming its subject and what would
go wrong at failover."""

from __future__ import annotations

import datetime as dt

from dr_stream.core.lag import PartitionLag
from dr_stream.core.policy import TopicRenamer
from dr_stream.operations.failover import GroupPosition
from dr_stream.operations.readiness import (
    FAIL,
    OK,
    Check,
    Verdict,
    cluster_checks,
    failover_checks,
    flow_check,
    lag_checks,
    topic_checks,
    translation_checks,
)
from dr_stream.positions.sync_outcome import Synced
from dr_stream.positions.translation_rule import Translation

SAME = TopicRenamer("${topic}")
ALIASES = ("dc1", "dc2")
NOW = 1_800_000_000.0


def states(checks: list[Check]) -> dict[str, str]:
    return {c.subject: c.state for c in checks}


def test_a_topic_missing_or_with_other_partitions_on_the_destination_fails_by_name():
    checks = topic_checks({"orders": 3, "payments": 2, "refunds": 1}, {"orders": 3, "payments": 4}, SAME, ALIASES, None)
    assert states(checks) == {"orders": OK, "payments": FAIL, "refunds": FAIL}
    assert [c.line() for c in checks if c.failed] == ["topics payments: dc2 has 4 partitions, dc1 has 2",
                                                      "topics refunds: missing on dc2"]


def test_the_destination_name_comes_from_the_rename():
    checks = topic_checks({"orders": 1}, {"orders": 1}, TopicRenamer("dc1.${topic}"), ALIASES, None)
    assert checks[0].line() == "topics orders: missing on dc2 as dc1.orders"


def test_a_source_config_override_not_on_the_copy_fails_and_names_both_values():
    configs = {"orders": ({"retention.ms": "1000", "cleanup.policy": "compact"}, {"cleanup.policy": "compact"}),
               "payments": ({"retention.ms": "5"}, {"retention.ms": "5", "segment.ms": "9"})}
    checks = topic_checks({"orders": 1, "payments": 1}, {"orders": 1, "payments": 1}, SAME, ALIASES, configs)
    assert states(checks) == {"orders": FAIL, "payments": OK}
    assert checks[0].detail == "configs differ: retention.ms dc1=1000 dc2=(default)"


def test_configs_that_cannot_be_read_fail_with_the_cluster_that_refused():
    checks = topic_checks({"t": 1}, {"t": 1}, SAME, ALIASES, {"t": ({}, RuntimeError("TOPIC_AUTHORIZATION_FAILED"))})
    assert checks[0].line() == "topics t: configs unreadable on dc2: TOPIC_AUTHORIZATION_FAILED"


def test_no_selected_topic_is_a_failure_not_a_pass():
    assert topic_checks({}, {"x": 1}, SAME, ALIASES, None)[0].failed


def test_lag_is_judged_per_topic_by_its_oldest_waiting_record_against_the_rpo():
    lags = [PartitionLag("a", 0, 100, 89, 10, 4.0), PartitionLag("a", 1, 50, 49, 0, 0.0),
            PartitionLag("b", 0, 10, 2, 7, 90.0), PartitionLag("c", 0, 10, 2, 7, None),
            PartitionLag("gone", 0, None, 7, None, None)]
    checks = lag_checks(lags, rpo_s=60)
    assert states(checks) == {"a": OK, "b": FAIL, "c": FAIL}
    assert checks[0].detail == "10 records not copied, oldest 4.0 s (RPO 60 s)"
    assert checks[1].detail == "7 records not copied, the oldest 90.0 s old (b[0]) > RPO 60 s"
    assert "unknown for c[0]" in checks[2].detail  # and "gone", no longer on the source, is not judged


def row(group: str, offset: int, age_s: float, method: str = "exact", clamped: bool = False, partition: int = 0):
    return {"group": group, "topic": "t", "partition": partition, "source_offset": offset, "method": method,
            "clamped": clamped, "note": "clamped 9 -> 5 (destination log end)" if clamped else "",
            "translated_at": dt.datetime.fromtimestamp(NOW - age_s, dt.UTC)}


def test_an_idle_groups_old_translation_is_current_and_a_moved_groups_old_one_is_stale():
    rows = [row("idle", 40, 9000), row("moved", 40, 9000), row("moving", 40, 5)]
    commits = {("idle", "t", 0): 40, ("moved", "t", 0): 45, ("moving", "t", 0): 45}
    checks = translation_checks(rows, commits, NOW, max_age_s=60)
    assert states(checks) == {"idle": OK, "moved": FAIL, "moving": OK}
    assert checks[1].line() == "translation moved: t[0] committed at 45, translated at 40 9000 s ago > 60 s"


def test_a_translation_by_timestamp_clamped_or_missing_fails_the_group():
    rows = [row("ts", 5, 1, method="timestamp"), row("cl", 9, 1, clamped=True)]
    commits = {("ts", "t", 0): 5, ("cl", "t", 0): 9, ("new", "t", 0): 3}
    checks = {c.subject: c.detail for c in translation_checks(rows, commits, NOW, 60)}
    assert checks == {"ts": "t[0] translated by timestamp, not exactly",
                      "cl": "t[0] clamped to the destination's log (clamped 9 -> 5 (destination log end))",
                      "new": "t[0] not translated yet"}


def position(group: str, action: str, method: str = "exact", partition: int = 0) -> GroupPosition:
    t = Translation(group=group, topic="t", partition=partition, source_offset=10, source_timestamp=0, dest_topic="t",
                    dest_partition=partition, offset=10, method=method, note="", clamped=False, log_start=0,
                    log_end=20, last_copied=19, source_log_end=20, translated_at=0)
    return GroupPosition(t, Synced.read(action))


def test_a_group_moves_only_when_every_partition_would_be_committed_exactly():
    rows = [position("g", "would commit"), position("g", "unchanged", partition=1),
            position("busy", "skipped: group is STABLE on the destination (2 members)"),
            position("approx", "would commit", method="timestamp")]
    checks = {c.subject: c for c in failover_checks(rows, {})}
    assert checks["g"].state == OK and checks["g"].detail == "2 partitions would move exactly"
    assert checks["busy"].detail == "t[0] skipped: group is STABLE on the destination (2 members)"
    assert checks["approx"].detail == "t[0] would land by timestamp, not exactly"


def test_a_commit_the_destination_would_refuse_fails_the_group_first():
    checks = failover_checks([position("g", "would commit")], {"g": "dc2: User:x may not READ GROUP g"})
    assert checks[0].detail == "dc2: User:x may not READ GROUP g"


def test_the_flow_is_running_while_its_lag_samples_are_recent():
    assert flow_check("f", 1_000_000, 1_030_000, 60).state == OK
    assert flow_check("f", 1_000_000, 1_090_000, 60).detail == "last lag sample 90 s ago > 60 s: it is not running"
    assert flow_check("f", None, 1_000_000, 60).failed


def test_the_verdict_is_ready_only_without_a_failure_and_lists_each_one():
    verdict = Verdict("f", (*cluster_checks(ALIASES, ["dc1"]), Check("acls", "f", "skipped", "off")))
    assert not verdict.ready
    assert verdict.as_dict()["failures"] == ["clusters dc1: does not answer"]
    assert Verdict("f", (Check("acls", "f", "skipped", "off"),)).ready
