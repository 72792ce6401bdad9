"""Replication latency (when the destination acknowledged a record minus the record's timestamp),
learnt from the runs the sink's producer publishes, not from each record.

A run is published again each time it grows, with its newest record's timestamp and the time
that record was acknowledged: so the latency of the last record of every published version is
exact. The records a version adds since the one before are counted between the latency of the
previous version's last record and that of this version's last record, spread evenly: under a
steady flow both ends are a few milliseconds apart; during a catch-up the spread covers the
oldest and newest records of the step. A run seen for the first time spreads its records from
its last record's latency up to what its first record's would be if it had been acknowledged
with the last.

Invariant: every newly copied record is counted exactly once, whatever order versions of
different partitions arrive in; a version that adds nothing (already seen) counts nothing.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from dr_stream.index import Run

# Seconds: from the real-time mode's milliseconds to a micro-batch's seconds and a catch-up's hours.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


@dataclass(frozen=True)
class CopiedSpan:
    """`records` newly acknowledged, with latencies spread over [low_s, high_s]."""

    topic: str
    records: int
    low_s: float
    high_s: float


def newly_copied(previous: Run | None, run: Run) -> CopiedSpan | None:
    """What `run` adds to `previous`, the last version seen of the same destination partition."""
    if run.copied_at is None or run.last_timestamp is None:
        return None
    done_through = run.dest_start - 1 if previous is None else max(previous.dest_end, run.dest_start - 1)
    added = run.dest_end - done_through
    if added <= 0:
        return None
    last = max(0.0, (run.copied_at - run.last_timestamp) / 1000)
    if previous is not None and previous.copied_at is not None and previous.last_timestamp is not None:
        before = max(0.0, (previous.copied_at - previous.last_timestamp) / 1000)
    else:
        first = run.first_timestamp if run.first_timestamp is not None else run.last_timestamp
        before = max(0.0, (run.copied_at - first) / 1000)
    return CopiedSpan(run.origin_topic, added, min(last, before), max(last, before))


@dataclass
class SpreadHistogram:
    """A cumulative histogram fed with spans of records rather than single values."""

    bounds: tuple[float, ...] = BUCKETS
    counts: list[float] = field(default_factory=list)  # per bound, records at or below it
    total: int = 0
    sum: float = 0.0

    def __post_init__(self) -> None:
        self.counts = self.counts or [0.0] * len(self.bounds)

    def add(self, records: int, low: float, high: float) -> None:
        self.total += records
        self.sum += records * (low + high) / 2
        for i, bound in enumerate(self.bounds):
            if high <= bound:
                self.counts[i] += records
            elif low <= bound:
                self.counts[i] += records * (bound - low) / (high - low)

    def quantile(self, q: float) -> float | None:
        """The smallest bound holding at least `q` of the records (None when nothing was counted)."""
        if not self.total:
            return None
        i = bisect.bisect_left(self.counts, q * self.total)
        return self.bounds[i] if i < len(self.bounds) else float("inf")

    def buckets(self) -> list[tuple[str, float]]:
        """Prometheus's cumulative buckets, +Inf last; whole records, never decreasing."""
        out = [(repr(b), float(int(c + 1e-9))) for b, c in zip(self.bounds, self.counts, strict=True)]
        return [*out, ("+Inf", float(self.total))]
