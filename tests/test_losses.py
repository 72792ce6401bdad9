"""The rules of the losses ledger: what counts as lost, what a restart records again, what the
checkpoint says the query reads next, and what the drill makes of a recorded loss (pure)."""

from __future__ import annotations

import datetime as dt

from dr_stream.operations.readiness import FAIL, OK, loss_checks
from dr_stream.replication.checkpoint_positions import newest_batch, offset_log_positions
from dr_stream.replication.loss_watch import handled_through, recreated_topics, recreation_losses, starting_offsets
from dr_stream.replication.losses import Loss, life_starts_of, retention_losses, skipped_losses, unrecorded

NOW = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.UTC)


def test_a_log_start_past_the_next_offset_to_read_is_a_retention_loss_of_exactly_the_gap():
    found = retention_losses({("t", 0): 60, ("t", 1): 400, ("t", 2): 5}, {("t", 0): 390, ("t", 1): 390, ("t", 2): 5},
                             NOW)
    assert found == [Loss("t", 0, 60, 389, 330, "retention", NOW)]


def test_a_partition_the_source_no_longer_lists_is_not_judged():
    assert retention_losses({("gone", 0): 10}, {}, NOW) == []


def test_a_gap_found_again_by_a_restart_is_recorded_once_and_only_what_grew_is_added():
    recorded = [Loss("t", 0, 60, 389, 330, "retention", NOW)]
    later = NOW + dt.timedelta(minutes=5)
    assert unrecorded([Loss("t", 0, 60, 389, 330, "retention", later)], recorded) == []
    assert unrecorded([Loss("t", 0, 60, 499, 440, "retention", later)], recorded) == [
        Loss("t", 0, 390, 499, 110, "retention", later)]
    # another partition, or another cause over the same offsets, is its own loss
    other = [Loss("t", 1, 60, 389, 330, "retention", later), Loss("t", 0, 60, 389, -1, "topic-recreated", later)]
    assert unrecorded(other, recorded) == other


def test_a_loss_reads_as_one_line_and_as_json_with_its_instant_in_utc():
    loss = Loss("orders", 2, 60, 389, 330, "retention", NOW)
    assert loss.line() == "orders[2]: 330 records lost (retention), offsets 60-389, detected 2026-11-26T12:00:00Z"
    assert loss.as_dict() == {"topic": "orders", "partition": 2, "first_offset": 60, "last_offset": 389,
                              "records": 330, "cause": "retention", "detected_at": "2026-11-26T12:00:00.000000Z",
                              "destination_offset": None}
    recreated = Loss("o", 0, 300, -1, -1, "topic-recreated", NOW, 900)
    assert recreated.line() == ("o[0]: an unknown number of records lost (topic-recreated), offsets from 300, "
                                "detected 2026-11-26T12:00:00Z")


def test_an_offset_file_gives_each_source_partitions_next_offset_and_no_marker_for_one():
    text = ('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n'
            '{"a":{"0":10100,"1":-2},"b":{"0":11100}}\n')
    assert offset_log_positions(text) == {("a", 0): 10100, ("b", 0): 11100}
    assert offset_log_positions("v1\n{}\n") == {}


def test_the_newest_batch_is_the_highest_number_and_checksums_are_not_batches():
    assert newest_batch(["0", "1", "12", ".12.crc", "3", "12.tmp"]) == 12
    assert newest_batch([".0.crc"]) is None


def test_what_was_copied_past_the_checkpoint_is_handled_not_lost():
    # the checkpoint lags the copy (progress is written after the batch): the mark says 99 is on the destination
    assert handled_through({("t", 0): 60, ("t", 1): 80, ("x", 0): 5}, {("t", 0): 99, ("t", 2): 9}, {"t": 3}) == {
        ("t", 0): 100, ("t", 1): 80, ("t", 2): 10}


def test_each_recent_loss_fails_the_drill_on_its_own_line_and_none_is_ok():
    losses = [Loss("t", 0, 60, 389, 330, "retention", NOW), Loss("t", 1, 60, 389, 330, "retention", NOW)]
    checks = loss_checks("f", losses, 7 * 24 * 3600)
    assert [(c.subject, c.state) for c in checks] == [("t[0]", FAIL), ("t[1]", FAIL)]
    assert checks[0].line() == "losses t[0]: " + losses[0].line()
    none = loss_checks("f", [], 7 * 24 * 3600)
    assert [(c.state, c.detail) for c in none] == [(OK, "none recorded in the last 168 h")]


def test_a_topic_with_a_new_id_is_recreated_and_one_not_seen_before_is_only_new():
    assert recreated_topics({"a": "id1", "b": "id2"}, {"a": "id1", "b": "id9", "c": "id3"}) == ["b"]
    assert recreated_topics({}, {"a": "id1"}) == []


def test_a_recreated_topic_is_recorded_per_partition_with_where_its_new_copies_begin():
    found = recreation_losses(["o"], {"o": 2, "x": 1}, {("o", 0): 300, ("o", 1): 280}, {("dc1.o", 0): 300,
                              ("dc1.o", 1): 280}, lambda t: f"dc1.{t}", NOW)
    assert found == [Loss("o", 0, 300, -1, -1, "topic-recreated", NOW, 300),
                     Loss("o", 1, 280, -1, -1, "topic-recreated", NOW, 280)]
    # the offset index keeps the old runs apart from there, under the destination's names
    later = Loss("o", 0, 0, -1, -1, "topic-recreated", NOW, 500)
    assert life_starts_of([*found, later, Loss("o", 0, 5, 9, 5, "retention", NOW)], lambda t: f"dc1.{t}") == {
        ("dc1.o", 0): 500, ("dc1.o", 1): 280}


def test_the_new_checkpoint_starts_a_recreated_topic_at_its_first_record_and_the_rest_where_they_were():
    assert starting_offsets({"o": 2, "p": 2}, {("o", 0): 300, ("p", 0): 41}, ["o"]) == (
        '{"o": {"0": -2, "1": -2}, "p": {"0": 41, "1": -2}}')


def test_a_recreation_found_again_before_the_flow_read_on_is_recorded_once():
    entry = Loss("o", 0, 300, -1, -1, "topic-recreated", NOW, 300)
    again = Loss("o", 0, 300, -1, -1, "topic-recreated", NOW + dt.timedelta(minutes=1), 300)
    assert unrecorded([again], [entry]) == []
    recreated_twice = Loss("o", 0, 40, -1, -1, "topic-recreated", NOW, 340)
    assert unrecorded([recreated_twice], [entry]) == [recreated_twice]


def test_a_source_that_ends_below_what_was_copied_is_recorded_as_rewound_from_its_log_end():
    from dr_stream.replication.loss_watch import rewind_losses
    from dr_stream.replication.losses import rewinds_of

    found = rewind_losses({("t", 0): (60, 99)}, {("t", 0): 100}, NOW)
    assert [(x.first_offset, x.last_offset, x.records, x.cause, x.destination_offset) for x in found] == [
        (60, 99, 40, "offsets-rewound", 100)]
    assert rewinds_of(found, lambda t: f"x.{t}") == {("x.t", 0): [(60, 100)]}


def test_the_first_record_written_again_is_found_by_halving_and_an_unreadable_one_stops_at_the_lowest():
    from dr_stream.replication.loss_watch import first_differing

    asked: list[int] = []

    def differs(offset: int) -> bool:
        asked.append(offset)
        return offset >= 85

    assert first_differing(0, 89, differs) == 85
    assert len(asked) <= 7
    assert first_differing(10, 89, lambda offset: None) == 10
    assert first_differing(89, 89, differs) == 89


def test_offsets_a_running_batch_read_past_are_lost_only_below_the_log_start_and_adjacent_ones_join():
    uncopied = {("t", 0): [(40, 50), (50, 70), (90, 91)], ("t", 1): [(5, 6)], ("gone", 0): [(0, 9)]}
    found, under_way = skipped_losses(uncopied, {("t", 0): 60, ("t", 1): 3}, NOW)
    # t[0]: 40..59 were deleted before they were read; 60..69 and 90 were read (filtered out, markers)
    assert [(x.topic, x.partition, x.first_offset, x.last_offset, x.records, x.cause) for x in found] == \
        [("t", 0, 40, 59, 20, "retention")]
    assert under_way == {}


def test_a_deletion_the_batches_are_still_crossing_waits_to_be_one_entry_unless_settled():
    found, under_way = skipped_losses({("t", 0): [(40, 50), (50, 60)]}, {("t", 0): 100}, NOW)
    assert found == [] and under_way == {("t", 0): [(40, 60)]}
    found, under_way = skipped_losses({("t", 0): [(40, 60), (60, 130)]}, {("t", 0): 100}, NOW)
    assert found == [Loss("t", 0, 40, 99, 60, "retention", NOW)] and under_way == {}
    found, _ = skipped_losses({("t", 0): [(40, 60)]}, {("t", 0): 100}, NOW, settle=True)
    assert found == [Loss("t", 0, 40, 59, 20, "retention", NOW)]


def _remote(topic: str) -> str:
    return f"dc1.{topic}"


def test_an_entry_leaves_the_ledger_only_when_old_and_behind_everything_the_destination_holds():
    from dr_stream.replication.losses import KEPT_S, outlived

    old = NOW - dt.timedelta(seconds=KEPT_S + 60)
    young = NOW - dt.timedelta(seconds=KEPT_S - 60)
    behind = Loss("t", 0, 10, 19, 10, "retention", old)
    across = Loss("t", 1, 10, 19, 10, "retention", old)  # the destination still holds copies from before it
    recent = Loss("t", 0, 30, 39, 10, "retention", young)
    unknown = Loss("u", 0, 10, 19, 10, "retention", old)  # a partition the flow has no runs of
    deleted = Loss("gone", 0, 10, 19, 10, "retention", old)
    refused = Loss("t", 0, 25, 25, 1, "refused", old)
    recreated_past = Loss("t", 2, 0, -1, -1, "topic-recreated", old, destination_offset=500)
    rewound_not_past = Loss("t", 3, 60, 99, 40, "offsets-rewound", old, destination_offset=900)
    entries = [behind, across, recent, unknown, deleted, refused, recreated_past, rewound_not_past]
    held_from = {("t", 0): 40, ("t", 1): 15}
    dest_starts = {("dc1.t", 2): 501, ("dc1.t", 3): 800}
    found = outlived(entries, NOW, held_from, dest_starts, {"dc1.t", "dc1.u"}, _remote)
    assert found == [behind, deleted, refused, recreated_past]


def test_the_ledger_less_what_outlived_it_is_sql_that_names_each_entry_by_what_makes_it_one(tmp_path):
    from deltalake import DeltaTable, QueryBuilder, write_deltalake

    from dr_stream.replication.losses import dropped_sql

    assert dropped_sql([]) == "SELECT * FROM t"
    write_deltalake(str(tmp_path), _ledger_rows([("t", 0, 10, 19, "retention", None),
                                                 ("t", 0, 20, 29, "retention", None),
                                                 ("o'k", 1, 60, 99, "offsets-rewound", 900),
                                                 ("o'k", 1, 60, 99, "offsets-rewound", 950)]))
    sql = dropped_sql([Loss("t", 0, 10, 19, 10, "retention", NOW),
                       Loss("o'k", 1, 60, 99, 40, "offsets-rewound", NOW, destination_offset=900)])
    kept = QueryBuilder().register("t", DeltaTable(str(tmp_path))).execute(sql).read_all()
    left = zip(kept.column("topic").to_pylist(), kept.column("first_offset").to_pylist(),
               kept.column("destination_offset").to_pylist(), strict=True)
    assert sorted(left) == [("o'k", 60, 950), ("t", 20, None)]


def _ledger_rows(rows):
    from arro3.core import Array, DataType, Field, Schema, Table

    fields = [("topic", DataType.string()), ("partition", DataType.int32()), ("first_offset", DataType.int64()),
              ("last_offset", DataType.int64()), ("cause", DataType.string()), ("destination_offset", DataType.int64())]
    columns = list(zip(*rows, strict=True))
    return Table.from_arrays([Array(list(c), t) for c, (_, t) in zip(columns, fields, strict=True)],
                             schema=Schema([Field(n, t) for n, t in fields]))
