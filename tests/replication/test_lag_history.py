"""The lag history topic's samples (pure) and the plot drawn from them."""

from __future__ import annotations

from dr_stream.core.lag import PartitionLag
from dr_stream.operations.lag_plot import draw_lag
from dr_stream.replication.lag_history import LagSample, decode, encode, sample_of


def test_a_sample_sums_a_topics_records_and_keeps_its_most_behind_partitions_seconds():
    sample = sample_of([PartitionLag("a", 0, 9, 4, 5, 1.5), PartitionLag("a", 1, 9, 6, 3, 4.0),
                        PartitionLag("b", 0, 9, 8, 0, 0.0), PartitionLag("c", 0, None, 3, None, None),
                        PartitionLag("d", 0, 9, 2, 7, None)], at_ms=123)
    assert sample == LagSample(123, {"a": (8, 4.0), "b": (0, 0.0), "d": (7, None)})
    assert decode(encode(sample)) == sample


def test_a_record_that_is_not_a_sample_reads_as_none():
    assert decode(b"{not json") is None and decode(None) is None and decode(b'{"at": 1}') is None


def test_the_plot_is_a_png_with_a_records_and_a_seconds_series_per_topic(tmp_path):
    samples = [LagSample(1_700_000_000_000 + i * 5000, {"a": (i, i / 2), "b": (2 * i, None)}) for i in range(10)]
    path = tmp_path / "lag.png"
    drawn = draw_lag(samples, str(path), "f")
    assert drawn == {"records": ["a", "b"], "seconds": ["a"]}
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
