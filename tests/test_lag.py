"""Replication lag: one rule for the progress line, status, failback and the RPO report."""

from __future__ import annotations

from dr_stream.core.lag import PartitionLag, first_waiting, partition_lags, records_behind, spark_offsets, total_behind


def test_records_behind_counts_from_the_next_offset_to_copy_to_the_log_end():
    assert records_behind(0, 100, 60) == 40
    assert records_behind(0, 100, 100) == 0


def test_nothing_copied_counts_from_the_log_start_and_retention_caps_what_can_be_copied():
    assert records_behind(30, 100, None) == 70
    assert records_behind(30, 100, 10) == 70


def test_a_position_past_the_end_is_zero_behind():
    assert records_behind(0, 5, 9) == 0


def test_total_behind_sums_partitions_and_counts_unread_ones_from_their_start():
    bounds = {("t", 0): (0, 100), ("t", 1): (20, 50)}
    assert total_behind(bounds, {("t", 0): 90}) == 10 + 30


def test_spark_offsets_read_json_text_or_parsed_and_nothing_from_garbage():
    assert spark_offsets('{"t": {"0": 5, "1": 7}}') == {("t", 0): 5, ("t", 1): 7}
    assert spark_offsets({"t": {"2": 1}}) == {("t", 2): 1}
    assert spark_offsets("not json") == spark_offsets(None) == {}




def test_partition_lag_counts_waiting_records_and_ages_the_oldest_of_them():
    bounds = {("t", 0): (0, 100), ("t", 1): (0, 50), ("t", 2): (40, 60)}
    nxt = {("t", 0): 90, ("t", 1): 50, ("gone", 0): 7}
    assert first_waiting(bounds, nxt) == {("t", 0): 90, ("t", 2): 40}
    lags = partition_lags(bounds, nxt, {("t", 0): 7_000}, now_ms=10_000)
    assert lags == [
        PartitionLag("gone", 0, None, 6, None, None),  # the source no longer lists it
        PartitionLag("t", 0, 100, 89, 10, 3.0),
        PartitionLag("t", 1, 50, 49, 0, 0.0),
        PartitionLag("t", 2, 60, None, 20, None),  # its oldest waiting record could not be read
    ]
