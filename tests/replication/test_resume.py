"""What a restarted run skips: the marks rule, and the expressions the record path filters and counts with (chispa)."""

from __future__ import annotations

import re

from chispa import assert_df_equality

from dr_stream.replication.resume import Resume, disjoint, first_missing, resume_marks, unwritten_below


def test_what_the_destination_holds_is_skipped():
    marks = resume_marks({("t", 0): 41}, {}, {("t", 0): 100})
    assert (marks.skip_through, marks.recreated) == ({("t", 0): 41}, ())


def test_left_out_records_are_skipped_too_and_the_higher_mark_wins():
    marks = resume_marks({("t", 0): 41, ("t", 1): 90}, {("t", 0): 60, ("t", 1): 10, ("t", 2): 5},
                         {("t", 0): 100, ("t", 1): 100, ("t", 2): 100})
    assert marks.skip_through == {("t", 0): 60, ("t", 1): 90, ("t", 2): 5}


def test_a_mark_at_or_past_the_source_end_means_the_topic_was_recreated_and_skips_nothing():
    marks = resume_marks({("t", 0): 99, ("t", 1): 500}, {}, {("t", 0): 100, ("t", 1): 500})
    assert marks.skip_through == {("t", 0): 99}
    assert marks.recreated == ((("t", 1), 500, 500),)


def test_a_partition_the_source_no_longer_has_keeps_no_mark():
    assert resume_marks({("gone", 0): 3}, {}, {}).recreated == ((("gone", 0), 0, 3),)


def test_the_filter_keeps_only_records_above_their_partition_s_mark(spark):
    batch = spark.createDataFrame([("t", 0, 40), ("t", 0, 41), ("t", 0, 42), ("t", 1, 0), ("u", 0, 7),
                                   ("t:0", 0, 1)], "topic string, partition int, offset long")
    got = batch.where(~Resume({("t", 0): 41, ("u", 0): 3}).dropped())
    expected = spark.createDataFrame([("t", 0, 42), ("t", 1, 0), ("u", 0, 7), ("t:0", 0, 1)],
                                     "topic string, partition int, offset long")
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


def test_with_no_marks_the_filter_keeps_everything(spark):
    batch = spark.createDataFrame([("t", 0, 1)], "topic string, partition int, offset long")
    assert batch.where(~Resume().dropped()).count() == 1


def test_a_record_at_or_below_a_left_out_mark_counts_as_left_out_and_the_others_as_already_copied(spark):
    batch = spark.createDataFrame([("t", 0, 5), ("t", 0, 9), ("t", 0, 12)], "topic string, partition int, offset long")
    resume = Resume({("t", 0): 10}, {("t", 0): 6})
    got = batch.select("offset", resume.dropped().alias("dropped"), resume.left().alias("left"))
    assert sorted(tuple(r) for r in got.collect()) == [(5, True, True), (9, True, False), (12, False, False)]


def test_a_held_partition_keeps_its_records_before_the_refused_one_and_ranges_copied_past_a_hold_are_dropped(spark):
    batch = spark.createDataFrame([("t", 0, o) for o in range(40, 50)] + [("t", 1, 45), ("u", 0, 45)],
                                  "topic string, partition int, offset long")
    held = batch.where(~Resume(held={("t", 0): 42}).waiting())
    assert sorted(r.offset for r in held.collect() if r.partition == 0 and r.topic == "t") == [40, 41]
    assert held.count() == 4, "the other partitions are not held"

    reread = batch.where(~Resume(marks={("t", 0): 40}, copied={("t", 0): [(43, 44), (47, 47)]}).dropped())
    assert sorted(r.offset for r in reread.collect() if r.partition == 0 and r.topic == "t") == [41, 42, 45, 46, 48,
                                                                                                 49]
    assert reread.count() == 8


def test_thousands_of_copied_ranges_filter_in_one_stage_exactly(spark):
    # an active-active partition: every other record came back (filtered), so each copy is a range
    ranges = {("t", 0): [(o, o) for o in range(0, 6000, 2)], ("t", 1): [(5, 9), (3, 4)]}
    batch = spark.range(0, 6000).selectExpr("'t' AS topic", "0 AS partition", "id AS offset").union(
        spark.range(0, 12).selectExpr("'t' AS topic", "1 AS partition", "id AS offset"))
    kept = batch.where(~Resume(marks={("t", 0): -1}, copied=ranges).dropped())
    assert sorted(r.offset for r in kept.collect() if r.partition == 0) == list(range(1, 6000, 2))
    assert sorted(r.offset for r in kept.collect() if r.partition == 1) == [0, 1, 2, 10, 11]
    plan = kept._jdf.queryExecution().executedPlan().toString()
    assert len(re.findall(r"\*\(\d+\) Filter", plan)) == 2, plan  # "*(n)": inside a generated stage


def test_the_first_missing_offset_is_the_first_no_copied_range_holds_up_to_the_mark():
    assert first_missing(10, 98, [(0, 9), (10, 30), (57, 98)]) == 31
    assert first_missing(10, 98, [(0, 98)]) is None
    assert first_missing(10, 98, [(0, 5), (12, 98)]) == 10
    assert first_missing(10, 98, [(10, 20), (21, 97)]) == 98
    assert first_missing(10, 98, []) == 10


def test_ranges_are_joined_where_they_overlap_or_adjoin():
    assert disjoint([(5, 9), (0, 2), (3, 4), (8, 12), (20, 20)]) == [(0, 12), (20, 20)]


def test_a_write_that_failed_below_the_last_copy_lowers_the_mark_to_it_and_skips_what_was_copied_past_it():
    runs = {("t", 0): [(0, 9), (57, 98)], ("t", 1): [(0, 50)], ("t", 2): [(0, 3), (8, 9)]}

    def copied_from(key, first):
        return [(max(a, first), b) for a, b in runs[key] if b >= first]

    # t[0]: the batch read again from 5 lost 10-56; t[1]: complete; t[2]: read from 10, past its hole
    got = unwritten_below({("t", 0): 98, ("t", 1): 50, ("t", 2): 9}, {("t", 0): 5, ("t", 1): 20, ("t", 2): 10},
                          {("t", 0): [(200, 200)]}, copied_from)
    assert got.marks == {("t", 0): 9, ("t", 1): 50, ("t", 2): 9}
    assert got.copied == {("t", 0): [(57, 98), (200, 200)]}
    assert got.missing == {("t", 0): (10, 98)}


def test_a_partition_the_checkpoint_does_not_place_is_not_looked_at():
    got = unwritten_below({("t", 0): 98}, {}, {}, lambda key, first: [])
    assert (got.marks, got.copied, got.missing) == ({("t", 0): 98}, {}, {})


def test_records_left_out_at_failback_are_not_read_again_though_no_run_copied_them():
    runs = {("t", 0): [(0, 999)]}
    got = unwritten_below({("t", 0): 1001}, {("t", 0): 990}, {}, lambda key, first: runs[key], {("t", 0): 1001})
    assert (got.marks, got.missing) == ({("t", 0): 1001}, {})
    # past the left-out records, the check goes on as for any partition
    got = unwritten_below({("t", 0): 1005}, {("t", 0): 990}, {}, lambda key, first: [(0, 999), (1004, 1005)],
                          {("t", 0): 1001})
    assert (got.marks, got.missing) == ({("t", 0): 1001}, {("t", 0): (1002, 1005)})
