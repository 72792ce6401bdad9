"""Offset-index steps: merging runs, following retention (chispa). Copied records -> runs is a
contract with the JVM: tests/test_contracts.py and tests/contracts/copied_records.json."""

from __future__ import annotations

import datetime as dt

from chispa import assert_df_equality

from dr_stream.index.index_table import RUN_SCHEMA, drop_deleted_runs, merge_adjacent_runs

T0 = dt.datetime(2026, 1, 1)


def runs(spark, rows):
    return spark.createDataFrame([("c1", "t", 0, "t", 0, os, oe, ds, de, oe - os + 1, T0, T0, T0, None)
                                  for os, oe, ds, de in rows], RUN_SCHEMA)


def spans(df):
    return sorted((r.origin_start, r.origin_end, r.dest_start, r.dest_end, r.records) for r in df.collect())


class TestMergeAdjacentRuns:
    def test_runs_split_by_batch_boundaries_are_joined(self, spark):
        got = runs(spark, [(0, 99, 0, 99), (100, 199, 100, 199), (200, 200, 205, 205)]).transform(merge_adjacent_runs)
        assert spans(got) == [(0, 199, 0, 199, 200), (200, 200, 205, 205, 1)]

    def test_merging_is_idempotent(self, spark):
        once = runs(spark, [(0, 9, 0, 9), (10, 19, 10, 19)]).transform(merge_adjacent_runs)
        assert_df_equality(once, once.transform(merge_adjacent_runs), ignore_row_order=True, ignore_nullable=True)


class TestDropDeletedRuns:
    def test_runs_entirely_below_the_log_start_go_and_straddling_ones_stay(self, spark):
        got = runs(spark, [(0, 99, 0, 99), (100, 199, 100, 199)]).transform(drop_deleted_runs({("t", 0): 150}))
        assert spans(got) == [(100, 199, 100, 199, 100)]

    def test_partitions_with_unknown_log_start_keep_their_runs(self, spark):
        got = runs(spark, [(0, 99, 0, 99)]).transform(drop_deleted_runs({("u", 0): 150}))
        assert spans(got) == [(0, 99, 0, 99, 100)]


class TestMergeRepublishedRuns:
    def test_versions_of_one_growing_run_collapse_to_the_longest(self, spark):
        got = runs(spark, [(0, 9, 100, 109), (0, 19, 100, 119), (20, 29, 120, 129)]).transform(merge_adjacent_runs)
        assert spans(got) == [(0, 29, 100, 129, 30)]

    def test_overlapping_rows_with_another_mapping_stay_apart(self, spark):
        got = runs(spark, [(0, 9, 100, 109), (0, 9, 105, 114)]).transform(merge_adjacent_runs)
        assert spans(got) == [(0, 9, 100, 109, 10), (0, 9, 105, 114, 10)]
