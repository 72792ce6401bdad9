"""The translate query's Spark steps: each record's position, and each batch's newest per key."""

from __future__ import annotations

from chispa import assert_df_equality

from dr_stream.positions.consumer_timestamps import GroupCommit
from dr_stream.positions.position_records import group_positions, newest_positions
from dr_stream.positions.translate_query import batch_commits

SOURCE = "key binary, value binary, partition int, offset long"


def record(commit: GroupCommit | None, partition: int, offset: int, value: bytes | None = b"", key: bytes = b""):
    if commit is not None:
        return commit.record_key(), commit.record_value(), partition, offset
    return key, value, partition, offset


def test_the_newest_record_of_each_key_wins_and_malformed_records_are_counted_apart(spark):
    a1, a2 = GroupCommit("app", "orders", 0, 10, 100), GroupCommit("app", "orders", 0, 12, 120)
    b = GroupCommit("other", "orders", 3, 7, -1)
    records = spark.createDataFrame([
        record(a2, 1, 9), record(a1, 1, 4), record(b, 0, 2),
        record(None, 2, 0, value=b"not json", key=a1.record_key()),
        record(None, 1, 10, value=None, key=a1.record_key()),  # a tombstone: neither a position nor malformed
    ], SOURCE)

    newest = records.transform(group_positions).transform(newest_positions)

    expected = spark.createDataFrame([
        ("app", "orders", 0, ("app", "orders", 0, 12, 120), 0),
        ("other", "orders", 3, ("other", "orders", 3, 7, -1), 0),
        (None, None, None, None, 1),
    ], newest.schema)
    assert_df_equality(newest, expected, ignore_row_order=True, ignore_nullable=True)
    commits, malformed = batch_commits(newest.collect())
    assert (sorted(commits, key=lambda c: c.key), malformed) == ([a2, b], 1)
