"""Left-out marks: records a failback chose not to copy, which the forward flow must skip.

At failback, records the returning cluster had but never replicated may be left out for good.
Their last offsets are committed, on that cluster, as group `left_out_group(<the other
cluster's cluster.id>)`; the forward flow (returning cluster -> other cluster) reads them when
it resumes and skips the records at or below them. Keeping the marks in Kafka lets the forward
flow find them without knowing the failback's config or files.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka.admin import AdminClient

from dr_stream.core.config import ClusterConfig
from dr_stream.core.contracts import SYNC_METADATA_PREFIX, left_out_group
from dr_stream.kafka.group_offsets.consumer_groups import commit_offsets, committed_offsets, delete_group


def read_left_out(source: ClusterConfig, destination_cluster_id: str,
                  partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> last origin offset left out, among `partitions`; empty when nothing was."""
    marks = committed_offsets(source, left_out_group(destination_cluster_id), partitions)
    return {k: c.offset - 1 for k, c in marks.items()}


def mark_left_out(returning: ClusterConfig, other_cluster_id: str, last_offsets: dict[tuple[str, int], int]) -> None:
    """Records, on the returning cluster, the last offset left out per partition."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    commit_offsets(returning, left_out_group(other_cluster_id),
                   {k: offset + 1 for k, offset in last_offsets.items()},
                   f"{SYNC_METADATA_PREFIX}left out at failback {stamp}")


def forget_left_out(source: AdminClient, destination_cluster_id: str) -> bool:
    """Drops the marks (after a restore or a reset, they describe records that are gone)."""
    return delete_group(source, left_out_group(destination_cluster_id))
