"""`__consumer_timestamps` records: parsing, the newest position per partition, malformed ones counted."""

from __future__ import annotations

from chispa import assert_df_equality

from dr_stream.offsets.consumer_timestamps import GroupCommit, latest_per_partition, parse_consumer_timestamps
from dr_stream.offsets.translation import COMMIT_SCHEMA


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


def test_a_commit_is_written_in_the_topic_s_key_and_value_format():
    commit = GroupCommit("g", "t", 3, 42, 1700)
    assert commit.record_key() == b'{"group":"g","topic":"t","partition":3}'
    assert commit.record_value() == b'{"offset":42,"timestamp":1700}'
