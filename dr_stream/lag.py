"""Replication lag: how many records of a source partition the flow has not copied yet.

One rule, used by the progress line, `status`, failback's wait and the RPO a failover
reports: the records still to copy are those from the next offset to copy (or the log start,
when nothing was copied, or when retention already deleted the next one) up to the log end.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

Partition = tuple[str, int]


def records_behind(log_start: int, log_end: int, next_offset: int | None) -> int:
    """Records in [max(log_start, next_offset), log_end)."""
    start = log_start if next_offset is None else max(log_start, next_offset)
    return max(0, log_end - start)


def total_behind(bounds: Mapping[Partition, tuple[int, int]], next_offsets: Mapping[Partition, int]) -> int:
    """Summed over partitions: `bounds` holds each one's (log start, log end)."""
    return sum(records_behind(start, end, next_offsets.get(key)) for key, (start, end) in bounds.items())


def spark_offsets(offsets: str | Mapping | None) -> dict[Partition, int]:
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


def behind_latest(latest: str | Mapping | None, end: str | Mapping | None) -> int:
    """Records between what a batch read up to (`endOffset`) and the newest offsets Spark saw
    (`latestOffset`), summed over partitions."""
    read = spark_offsets(end)
    return sum(records_behind(0, newest, read.get(key)) for key, newest in spark_offsets(latest).items())
