"""`dr-stream reset-offsets`: set a group to the first record at or after a datetime, on any cluster.

For groups the offset index does not cover (consumers that never committed on the source,
topics copied by another tool): record timestamps survive replication, so a datetime means
the same point on every cluster. The group must have no members; moving it backwards is the
point of a reset, so the never-rewind rule of automatic sync does not apply.
"""

from __future__ import annotations

import datetime as dt
import re

from confluent_kafka import TopicPartition

from dr_stream.core.config import FlowConfig
from dr_stream.kafka.admin import partition_counts
from dr_stream.kafka.cluster_context import ClusterContext, FlowClusters
from dr_stream.positions import GroupSync, SyncAction


def parse_datetime(text: str) -> int:
    """ISO 8601 (naive means UTC) -> epoch milliseconds."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 datetime like 2026-11-21T16:34:33.236") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def offsets_at(context: ClusterContext, partitions: list[tuple[str, int]], at_ms: int) -> dict[tuple[str, int], int]:
    """First offset with timestamp >= at_ms per partition; the log end where every record is older."""
    reader = context.reader()
    try:
        consumer = reader.get()
        found = consumer.offsets_for_times([TopicPartition(t, p, at_ms) for t, p in partitions], timeout=15)
        out = {}
        for tp in found:
            if tp.offset < 0:
                tp.offset = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=15)[1]
            out[(tp.topic, tp.partition)] = tp.offset
        return out
    finally:
        reader.close()


def reset_to_datetime(config: FlowConfig, alias: str, group: str, topic_pattern: str, at_ms: int,
                      dry_run: bool = False) -> list[SyncAction]:
    """Resets `group` on the flow's cluster `alias`, once that cluster answers with the cluster.id
    the flow's state recorded for it (one admin client and one reader for the whole reset)."""
    with FlowClusters.of(config) as clusters:
        context = clusters.source if alias == config.source.alias else clusters.destination
        context.cluster_id()
        return _reset(context, group, topic_pattern, at_ms, dry_run)


def _reset(context: ClusterContext, group: str, topic_pattern: str, at_ms: int, dry_run: bool) -> list[SyncAction]:
    counts = partition_counts(context.admin)
    partitions = [(t, p) for t, n in sorted(counts.items())
                  if re.fullmatch(topic_pattern, t) and not t.startswith("__") for p in range(n)]
    if not partitions:
        raise ValueError(f"no topic matches {topic_pattern!r}")
    wanted = offsets_at(context, partitions, at_ms)
    sync = GroupSync(context, "reset-offsets", offsets=context.group_offsets)
    try:
        return sync.apply(group, wanted, force=True, dry_run=dry_run)
    finally:
        sync.close()
