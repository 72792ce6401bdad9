"""Offset-index steps: copied records -> runs, merging, retention (chispa)."""

from __future__ import annotations

import datetime as dt

from chispa import assert_df_equality

from dr_stream.index.index_table import RUN_SCHEMA, drop_deleted_runs, merge_adjacent_runs, to_runs

T0 = dt.datetime(2026, 1, 1)
COPIED = ("origin_cluster string, origin_topic string, origin_partition int, dest_topic string, dest_partition int, "
          "origin_offset long, dest_offset long, origin_timestamp timestamp, copied_at timestamp")


def copied(spark, pairs):
    return spark.createDataFrame([("c1", "t", 0, "t", 0, o, d, T0, T0) for o, d in pairs], COPIED)


def runs(spark, rows):
    return spark.createDataFrame([("c1", "t", 0, "t", 0, os, oe, ds, de, oe - os + 1, T0, T0, T0, None)
                                  for os, oe, ds, de in rows], RUN_SCHEMA)


def spans(df):
    return sorted((r.origin_start, r.origin_end, r.dest_start, r.dest_end, r.records) for r in df.collect())


class TestToRuns:
    def test_records_whose_offsets_advance_together_make_one_run(self, spark):
        assert spans(copied(spark, [(5, 105), (6, 106), (7, 107)]).transform(to_runs)) == [(5, 7, 105, 107, 3)]

    def test_a_gap_on_either_side_starts_a_new_run(self, spark):
        got = copied(spark, [(5, 105), (6, 106), (8, 107), (9, 110)]).transform(to_runs)
        assert spans(got) == [(5, 6, 105, 106, 2), (8, 8, 107, 107, 1), (9, 9, 110, 110, 1)]

    def test_a_record_copied_twice_keeps_both_places(self, spark):
        got = copied(spark, [(5, 10), (6, 11), (5, 12), (6, 13)]).transform(to_runs)
        assert spans(got) == [(5, 6, 10, 11, 2), (5, 6, 12, 13, 2)]


class TestMergeAdjacentRuns:
    def test_runs_split_by_batch_boundaries_are_joined(self, spark):
        got = runs(spark, [(0, 99, 0, 99), (100, 199, 100, 199), (200, 200, 205, 205)]).transform(merge_adjacent_runs)
        assert spans(got) == [(0, 199, 0, 199, 200), (200, 200, 205, 205, 1)]

    def test_merging_is_idempotent(self, spark):
        once = runs(spark, [(0, 9, 0, 9), (10, 19, 10, 19)]).transform(merge_adjacent_runs)
        assert_df_equality(once, once.transform(merge_adjacent_runs), ignore_row_order=True, ignore_nullable=True)


class TestDropDeletedRuns:
    def test_runs_entirely_below_the_log_start_go_and_straddling_ones_stay(self, spark):
        starts = spark.createDataFrame([("t", 0, 150)], "dest_topic string, dest_partition int, log_start long")
        got = runs(spark, [(0, 99, 0, 99), (100, 199, 100, 199)]).transform(drop_deleted_runs(starts))
        assert spans(got) == [(100, 199, 100, 199, 100)]

    def test_partitions_with_unknown_log_start_keep_their_runs(self, spark):
        starts = spark.createDataFrame([], "dest_topic string, dest_partition int, log_start long")
        got = runs(spark, [(0, 99, 0, 99)]).transform(drop_deleted_runs(starts))
        assert spans(got) == [(0, 99, 0, 99, 100)]


class TestMergeRepublishedRuns:
    def test_versions_of_one_growing_run_collapse_to_the_longest(self, spark):
        got = runs(spark, [(0, 9, 100, 109), (0, 19, 100, 119), (20, 29, 120, 129)]).transform(merge_adjacent_runs)
        assert spans(got) == [(0, 29, 100, 129, 30)]

    def test_overlapping_rows_with_another_mapping_stay_apart(self, spark):
        got = runs(spark, [(0, 9, 100, 109), (0, 9, 105, 114)]).transform(merge_adjacent_runs)
        assert spans(got) == [(0, 9, 100, 109, 10), (0, 9, 105, 114, 10)]
