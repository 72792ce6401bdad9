"""Translation rules (DESIGN 1.6) on index runs, clamping, and `__consumer_timestamps` parsing."""

from __future__ import annotations

import datetime as dt

import pytest
from chispa import assert_df_equality

from dr_stream.consumer_timestamps import latest_per_partition, parse_consumer_timestamps
from dr_stream.index import RUN_SCHEMA
from dr_stream.policy import GroupFilter, TopicRenamer
from dr_stream.translate import COMMIT_SCHEMA, clamp, translate_commits

T0 = dt.datetime(2026, 1, 1)


def index(spark, rows, topic="t", dest_topic="t"):
    return spark.createDataFrame([("c1", topic, 0, dest_topic, 0, os, oe, ds, de, oe - os + 1, T0, T0, T0)
                                  for os, oe, ds, de in rows], RUN_SCHEMA)


IDENTITY = TopicRenamer()


def translate(spark, runs, offset, renamer=IDENTITY, topic="t"):
    commits = spark.createDataFrame([("g", topic, 0, offset, 1000)], COMMIT_SCHEMA)
    row = commits.transform(translate_commits(runs, renamer)).first()
    return row.translated, row.method, row.last_copied


class TestTranslateCommits:
    # origin 200..999 landed at 300..1099 (dc2 had 300 records of its own first)
    @pytest.mark.parametrize(("committed", "expected"), [(200, 300), (250, 350), (999, 1099)])
    def test_an_offset_inside_a_run_maps_exactly(self, spark, committed, expected):
        assert translate(spark, index(spark, [(200, 999, 300, 1099)]), committed) == (expected, "exact", 999)

    def test_an_offset_before_everything_copied_maps_to_the_first_copied_record(self, spark):
        assert translate(spark, index(spark, [(200, 999, 300, 1099)]), 50) == (300, "exact", 999)

    def test_an_offset_in_a_gap_between_runs_maps_to_the_next_copied_record(self, spark):
        runs = index(spark, [(0, 9, 0, 9), (20, 29, 15, 24)])
        assert translate(spark, runs, 12) == (15, "exact", 29)

    def test_an_offset_past_everything_copied_resumes_after_the_last_copied_record(self, spark):
        assert translate(spark, index(spark, [(0, 9, 0, 9)]), 10) == (10, "next", 9)
        assert translate(spark, index(spark, [(0, 9, 0, 9)]), 15) == (10, "next", 9)

    def test_a_record_copied_twice_resumes_at_its_first_copy(self, spark):
        assert translate(spark, index(spark, [(0, 9, 0, 9), (5, 9, 10, 14)]), 7) == (7, "exact", 9)

    def test_no_index_for_the_partition_asks_for_the_timestamp_fallback(self, spark):
        assert translate(spark, index(spark, []), 10) == (None, "timestamp", None)

    def test_renamed_topics_are_looked_up_under_the_destination_name(self, spark):
        runs = index(spark, [(0, 9, 100, 109)], dest_topic="dc1.t")
        assert translate(spark, runs, 3, TopicRenamer("dc1.${topic}")) == (103, "exact", 9)
        assert translate(spark, runs, 3)[1] == "timestamp"


class TestClamp:
    def test_inside_the_log_is_unchanged(self):
        assert clamp(5, 0, 10) == (5, "")

    def test_below_the_log_start_and_past_the_log_end_are_clamped_and_said(self):
        assert clamp(2, 5, 10) == (5, "clamped 2 -> 5 (destination log start)")
        assert clamp(300, 0, 0) == (0, "clamped 300 -> 0 (destination log end)")


class TestConsumerTimestamps:
    SCHEMA = "key binary, value binary, offset long"

    def test_well_formed_records_parse_and_the_newest_per_partition_wins(self, spark):
        key = b'{"group":"g","topic":"t","partition":0}'
        df = spark.createDataFrame([(key, b'{"offset":5,"timestamp":50}', 0), (key, b'{"offset":9,"timestamp":90}', 1)],
                                   self.SCHEMA)
        got = df.transform(parse_consumer_timestamps).transform(latest_per_partition)
        expected = spark.createDataFrame([("g", "t", 0, 9, 90)], COMMIT_SCHEMA)
        assert_df_equality(got, expected, ignore_nullable=True)

    def test_malformed_records_are_flagged_and_tombstones_dropped(self, spark):
        good = b'{"group":"g","topic":"t","partition":0}'
        df = spark.createDataFrame([
            (b"not json", b'{"offset":1}', 0),
            (good, b"oops", 1),
            (b'{"group":"g"}', b'{"offset":1,"timestamp":1}', 2),
            (good, b'{"offset":-3,"timestamp":1}', 3),
            (good, None, 4),
            (good, b'{"offset":7}', 5),
        ], self.SCHEMA)
        flags = [r._malformed for r in df.transform(parse_consumer_timestamps).orderBy("_record_offset").collect()]
        assert flags == [True, True, True, True, False]


class TestGroupFilter:
    def test_included_groups_match_and_replicator_groups_never_do(self):
        groups = GroupFilter(("app-.*", "spark-kafka-x"), ("app-test",))
        assert groups.matches("app-orders")
        assert not groups.matches("app-test")
        assert not groups.matches("spark-kafka-x")
        assert not groups.matches("other")


class _Copies:
    """The source partition as [(offset, original offset on the destination or None)]."""

    def __init__(self, log):
        self.log = log

    def original_at(self, topic, partition, offset, dest_topic):
        return next((original for at, original in self.log if at >= offset), None)

    def close(self):
        pass


class TestReturnedRecords:
    """After a failover, the source holds copies of the destination's records: [0, 100) are
    copies of destination offsets 500..599, [100, 110) are the source's own records."""

    LOG = [(i, 500 + i) for i in range(100)] + [(i, None) for i in range(100, 110)]

    def through(self, offset, translated, method, log=LOG):
        from dr_stream.translate import OffsetTranslator, Translation

        translator = OffsetTranslator(None, None, IDENTITY, {"bootstrap.servers": "127.0.0.1:1"},
                                      returned=_Copies(log))
        t = Translation("g", "t", 0, offset, -1, "t", 0, translated, method, "", False, None, None, None, None, 0)
        found = translator._through_returned(t)
        return found.offset, found.method

    def test_a_copy_at_the_committed_offset_maps_to_its_original(self):
        assert self.through(40, 1000, "next") == (540, "returned")

    def test_the_source_s_own_records_keep_the_index_translation(self):
        assert self.through(105, 7, "exact") == (7, "exact")

    def test_past_the_last_copy_with_nothing_indexed_resumes_after_the_last_original(self):
        assert self.through(100, None, "timestamp", log=self.LOG[:100]) == (600, "returned")
        assert self.through(100, 300, "next") == (600, "returned")

    def test_an_index_position_further_on_wins_over_the_last_original(self):
        assert self.through(110, 900, "next") == (900, "next")
