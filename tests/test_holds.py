"""Partitions held at a refused record: the refusal read from a query's error, a partition's
state from its events, and what a released partition reads again (pure rules)."""

from __future__ import annotations

import datetime as dt

from dr_stream.core.config import FlowConfig, parse_flow
from dr_stream.operations.readiness import FAIL, OK, hold_checks
from dr_stream.replication.holds import (
    HELD,
    RESUMED,
    RETRY,
    Hold,
    Holding,
    PartitionHolds,
    clamped,
    holds_now,
    hole_below,
    refusal_in,
    refused_loss,
)
from dr_stream.replication.losses import Loss, LossLedger

T0 = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)
ERROR = ("[STREAM_FAILED] Query replicate-x terminated with exception: Job aborted ...\n\tSuppressed: "
         "io.drstream.kafka.Refusals$Mark: dr-stream refused record {\"cluster\":\"c1\",\"topic\":\"orders\","
         "\"partition\":3,\"offset\":42,\"dest_topic\":\"x.orders\",\"dest_partition\":3,\"error\":"
         "\"RecordTooLargeException: The message is 3000 bytes\"}\n\tat ...")


def hold(partition: int, offset: int, minute: int, event: str = HELD) -> Hold:
    return Hold("orders", partition, offset, 10, "InvalidRecordException: no key", T0 + dt.timedelta(minutes=minute),
                event)


def test_the_refused_record_is_read_from_the_query_s_error_text():
    refusal = refusal_in(ERROR)
    assert (refusal.topic, refusal.partition, refusal.offset, refusal.dest_topic) == ("orders", 3, 42, "x.orders")
    assert refusal.error == "RecordTooLargeException: The message is 3000 bytes"


def test_an_error_that_names_no_refused_record_is_none():
    assert refusal_in("Job aborted: TimeoutException: Expiring 3 record(s)") is None
    assert refusal_in("dr-stream refused record {not json") is None


def test_a_partition_s_newest_event_decides_whether_it_is_held_skipped_retried_or_going():
    events = [hold(0, 50, 1), hold(1, 120, 2), hold(2, 7, 3), hold(2, 7, 4, RETRY), hold(3, 9, 5),
              hold(3, 9, 6, RESUMED)]
    skips = [refused_loss(hold(1, 120, 2), T0)]
    holding = holds_now(events, skips)
    assert holding.held_from() == {("orders", 0): 50}
    assert holding.resume_at() == {("orders", 1): 121, ("orders", 2): 7}
    assert set(holding.released()) == {("orders", 1), ("orders", 2)}


def test_a_refused_loss_at_another_offset_releases_nothing():
    holding = holds_now([hold(0, 50, 1)], [Loss("orders", 0, 49, 49, 1, "refused", T0)])
    assert holding.held_from() == {("orders", 0): 50}


def test_a_held_partition_is_handled_only_up_to_its_refused_record():
    assert clamped({("orders", 0): 90, ("orders", 1): 90}, {("orders", 0): 50}) == \
        {("orders", 0): 50, ("orders", 1): 90}


def config() -> FlowConfig:
    return parse_flow({"source": {"alias": "dc1", "bootstrap_servers": "127.0.0.1:1"},
                       "destination": {"alias": "dc2", "bootstrap_servers": "127.0.0.1:2"}}, "<test>")


def test_a_released_partition_is_read_again_from_its_first_record_not_copied_skipping_what_was_copied():
    lines: list[str] = []
    holds = PartitionHolds(lambda: None, config(), LossLedger("unused"), log=lines.append)
    # skipped at 120; 105-119 failed with it (one producer batch), 125-130 and 140-149 went on after it
    copied = {("orders", 1): [(0, 104), (125, 130), (140, 149)]}
    skipped = Holding({}, {("orders", 1): hold(1, 120, 1)}, {})
    marks, ranges, starts = holds.reread({("orders", 1): 149, ("orders", 2): 10}, skipped,
                                         lambda k, first: copied.get(k, []))
    assert marks == {("orders", 1): 104, ("orders", 2): 10} and starts == {("orders", 1): 105}
    assert ranges == {("orders", 1): [(120, 120), (125, 130), (140, 149)]}  # the skipped record stays skipped
    assert lines[0] == "orders[1]: records 105-119, before the held one, failed with it (the producer fails its " \
                       "whole batch) and are copied now"
    assert "16 records past the held one were copied before the hold took effect (125-130, 140-149)" in lines[1]
    # released once its batches read past the last range, not before
    holds.batch_committed({("orders", 1): 149})
    assert holds._until == {("orders", 1): 149}
    holds.batch_committed({("orders", 1): 150})
    assert holds._until == {}


def test_a_held_partition_is_read_again_from_the_records_that_failed_with_the_refused_one():
    holds = PartitionHolds(lambda: None, config(), LossLedger("unused"), log=lambda line: None)
    copied = {("orders", 0): [(0, 9), (57, 98)]}
    marks, ranges, starts = holds.reread({("orders", 0): 98}, Holding({("orders", 0): hold(0, 50, 1)}, {}, {}),
                                         lambda k, first: copied.get(k, []))
    assert marks == {("orders", 0): 9} and starts == {("orders", 0): 10} and ranges == {("orders", 0): [(57, 98)]}


def test_the_hole_below_a_refused_record_starts_past_the_highest_copy_below_it():
    assert hole_below(50, [(0, 9), (57, 98)]) == 10
    assert hole_below(50, [(0, 49), (51, 60)]) == 50
    assert hole_below(50, [(0, 80)]) == 50
    assert hole_below(50, []) == 0


def test_drill_fails_a_check_per_held_partition():
    checks = hold_checks("f", [hold(0, 50, 1)])
    assert [(c.area, c.subject, c.state) for c in checks] == [("holds", "orders[0]", FAIL)]
    assert [c.state for c in hold_checks("f", [])] == [OK]


def test_the_holds_table_keeps_each_partition_s_newest_event_and_the_last_month_s():
    from dr_stream.replication.holds import dropped_events_sql, outlived_events
    from dr_stream.replication.losses import KEPT_S

    now = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    old = now - dt.timedelta(seconds=KEPT_S + 60)
    young = now - dt.timedelta(seconds=60)
    held = Hold("t", 0, 10, 900, "too large", old)
    retried = Hold("t", 0, 10, 900, "", old, RETRY)
    resumed = Hold("t", 0, 10, -1, "", old, RESUMED)  # t[0]'s newest: it stays, alone of its partition's old ones
    again = Hold("t", 1, 5, 900, "too large", old)
    recent = Hold("t", 1, 7, 900, "too large", young)
    lone = Hold("u", 0, 3, 10, "policy", old)  # u[0]'s only event: whether it is held
    found = outlived_events([held, retried, resumed, again, recent, lone], now)
    assert found == [held, retried, again]
    assert dropped_events_sql(found) == (
        'SELECT * FROM t WHERE NOT ((topic = \'t\' AND "partition" = 0 AND record_offset = 10 AND event = \'held\') OR '
        '(topic = \'t\' AND "partition" = 0 AND record_offset = 10 AND event = \'retry\') OR '
        '(topic = \'t\' AND "partition" = 1 AND record_offset = 5 AND event = \'held\'))')
