"""Replication latency from the runs the sink publishes (pure)."""

from __future__ import annotations

from dr_stream.index.run_store import Run
from dr_stream.replication.copy_latency import SpreadHistogram, newly_copied


def run(dest_start: int, dest_end: int, first_ts: int, last_ts: int, copied_at: int, partition: int = 0) -> Run:
    return Run("c", "orders", partition, "orders", partition, dest_start, dest_end, dest_start, dest_end,
               first_ts, last_ts, copied_at)


def test_a_first_version_spreads_its_records_from_its_last_records_latency_to_its_first_records():
    span = newly_copied(None, run(0, 9, 1_000, 1_900, 2_000))
    assert (span.topic, span.records, span.low_s, span.high_s) == ("orders", 10, 0.1, 1.0)


def test_a_grown_version_counts_only_what_it_adds_between_the_two_last_records_latencies():
    before = run(0, 9, 1_000, 1_900, 2_000)  # last record: 100 ms
    after = run(0, 14, 1_000, 2_400, 2_430)  # last record: 30 ms
    span = newly_copied(before, after)
    assert (span.records, span.low_s, span.high_s) == (5, 0.03, 0.1)


def test_a_version_already_seen_or_without_acknowledgement_time_counts_nothing():
    seen = run(0, 9, 1_000, 1_900, 2_000)
    assert newly_copied(seen, seen) is None
    assert newly_copied(None, Run("c", "t", 0, "t", 0, 0, 9, 0, 9)) is None


def test_a_new_run_after_another_of_the_same_partition_counts_all_its_records():
    previous = run(0, 9, 1_000, 1_900, 2_000)
    span = newly_copied(previous, run(10, 19, 2_000, 2_900, 3_000))
    assert span.records == 10


def test_the_histogram_spreads_a_span_evenly_and_keeps_cumulative_whole_counts():
    h = SpreadHistogram(bounds=(0.01, 0.05, 0.1, 1.0))
    h.add(10, 0.0, 0.1)  # evenly over 0..100 ms
    h.add(4, 0.5, 0.5)
    assert h.buckets() == [("0.01", 1.0), ("0.05", 5.0), ("0.1", 10.0), ("1.0", 14.0), ("+Inf", 14.0)]
    assert h.total == 14 and abs(h.sum - (10 * 0.05 + 4 * 0.5)) < 1e-9
    assert h.quantile(0.5) == 0.1 and h.quantile(0.99) == 1.0


def test_an_empty_histogram_has_no_quantile():
    assert SpreadHistogram().quantile(0.5) is None
