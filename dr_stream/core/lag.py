"""Replication lag: how many records of a source partition the flow has not copied yet.

One rule, used by the progress line, the metrics, `status`, failback's wait and the RPO a
failover reports: the records still to copy are those from the next offset to copy (or the log start,
when nothing was copied, or when retention already deleted the next one) up to the log end.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Partition = tuple[str, int]


def records_behind(log_start: int, log_end: int, next_offset: int | None) -> int:
    """Records in [max(log_start, next_offset), log_end)."""
    start = log_start if next_offset is None else max(log_start, next_offset)
    return max(0, log_end - start)


def total_behind(bounds: Mapping[Partition, tuple[int, int]], next_offsets: Mapping[Partition, int]) -> int:
    """Summed over partitions: `bounds` holds each one's (log start, log end)."""
    return sum(records_behind(start, end, next_offsets.get(key)) for key, (start, end) in bounds.items())


def spark_offsets(offsets: str | Mapping[str, Any] | None) -> dict[Partition, int]:
    """A Kafka source's offsets as Spark's progress reports them (`{"topic": {"0": 42}}`, as JSON
    text or parsed) -> {(topic, partition): next offset}; empty when there are none."""
    if isinstance(offsets, str):
        try:
            offsets = json.loads(offsets)
        except ValueError:
            return {}
    if not isinstance(offsets, Mapping):
        return {}
    return {(topic, int(p)): int(o) for topic, partitions in offsets.items() for p, o in partitions.items()}


@dataclass(frozen=True)
class PartitionLag:
    """How far the copy of one source partition is behind: records not copied yet and the age of
    the oldest of them (0 when none waits; None when unknown)."""

    topic: str
    partition: int
    source_log_end: int | None
    last_copied: int | None
    lag_records: int | None
    lag_seconds: float | None


def first_waiting(bounds: Mapping[Partition, tuple[int, int]],
                  next_offsets: Mapping[Partition, int]) -> dict[Partition, int]:
    """The offset of the oldest record not copied yet, for each partition with one."""
    out = {}
    for key, (start, end) in bounds.items():
        behind = records_behind(start, end, next_offsets.get(key))
        if behind:
            out[key] = end - behind
    return out


def partition_lags(bounds: Mapping[Partition, tuple[int, int]], next_offsets: Mapping[Partition, int],
                   timestamps: Mapping[Partition, int], now_ms: float) -> list[PartitionLag]:
    """The one lag rule of the running flow (metrics, progress line) and of `status`.

    `bounds`: each source partition's (log start, log end), None-less; `next_offsets`: the next
    origin offset the flow has to handle; `timestamps`: the timestamp of each partition's first
    waiting record (`first_waiting`), where it could be read. A partition the flow handled that
    the source no longer lists keeps its last offset with unknown lag."""
    out = []
    for key in sorted(set(bounds) | set(next_offsets)):
        nxt = next_offsets.get(key)
        last = None if nxt is None else nxt - 1
        if key not in bounds:
            out.append(PartitionLag(key[0], key[1], None, last, None, None))
            continue
        start, end = bounds[key]
        behind = records_behind(start, end, nxt)
        stamp = timestamps.get(key)
        seconds = 0.0 if behind == 0 else None if stamp is None or stamp < 0 else max(0.0, (now_ms - stamp) / 1000)
        out.append(PartitionLag(key[0], key[1], end, last, behind, seconds))
    return out
