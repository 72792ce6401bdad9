"""`dr-stream status`: how far behind each replicated partition is, and how fresh translations are.

Replication lag per source partition is read against the offset index (its table and the
runs published since): records not copied yet (`lag.records_behind`, from the last copied
origin offset); seconds = age of the oldest record not copied yet (0 when nothing waits).
The text form is `report.format_status`.

For alerting, `over_thresholds` (pure) names every partition and group past the operator's
limits; the command exits 2 for those and 3 when a cluster does not answer, so a cron job or
a Kubernetes probe can act on the exit code alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from dr_stream.core.config import FlowConfig
from dr_stream.core.lag import PartitionLag, first_waiting, partition_lags
from dr_stream.index import index_snapshot
from dr_stream.kafka.admin import log_bounds, matching_partitions
from dr_stream.kafka.cluster_context import FlowClusters
from dr_stream.kafka.group_offsets.kafka4 import streams_groups_on
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.positions import RecordTimestamps, current_commits


@dataclass(frozen=True)
class Thresholds:
    max_lag_records: int | None = None
    max_lag_seconds: float | None = None
    max_translation_age: float | None = None


@dataclass(frozen=True)
class TranslationAge:
    group: str
    topic: str
    partition: int
    source_offset: int
    offset: int | None
    method: str
    action: str | None
    age_seconds: float


def source_commits(config: FlowConfig, clusters: FlowClusters) -> dict[tuple[str, str, int], int]:
    """The translated groups' committed offsets on the source now: the positions the flow takes
    (with `provenance.forward`, also those dr-stream synced there from elsewhere)."""
    forward_except = clusters.destination.reachable_id() if config.provenance.forward else None
    return {(c.group, c.topic, c.partition): c.offset for c in
            current_commits(clusters.source.group_offsets, clusters.source.admin, config.group_filter,
                            config.topic_filter, forward_except=forward_except,
                            more_groups=streams_groups_on(config))}


def replication_lag(config: FlowConfig, tables: FlowTables, clusters: FlowClusters, source_up: bool = True,
                    destination_up: bool = True) -> list[PartitionLag]:
    """Lag per source partition (`lag.partition_lags`, the rule the running flow's metrics use);
    with the source down (`source_up` False), what the index knows."""
    if destination_up:  # the table, plus the runs published since it was last written: as current as the copy
        # no offset asked: of the table, each partition's newest runs, where its copy stands
        copied = index_snapshot(config, tables.index, None, (), clusters.destination, log=lambda _: None,
                                asked={}).last_copied()
    else:
        copied = tables.index.store(asked={}).last_copied()
    next_offsets = {key: last + 1 for key, last in copied.items()}
    bounds: dict[tuple[str, int], tuple[int, int]] = {}
    if source_up:
        admin = clusters.source.admin
        bounds = log_bounds(admin, matching_partitions(admin, config.topic_filter, timeout=5), timeout=5)
    stamps = RecordTimestamps(clusters.source, shared=True)
    try:
        timestamps = stamps.of_records(first_waiting(bounds, next_offsets)) if bounds else {}
    finally:
        stamps.close()
    return partition_lags(bounds, next_offsets, timestamps, time.time() * 1000)


def translation_ages(tables: FlowTables) -> list[TranslationAge]:
    now = time.time()
    return [
        TranslationAge(r["group"], r["topic"], r["partition"], r["source_offset"], r["offset"], r["method"],
                       r["action"], round(now - r["translated_at"].timestamp(), 1))
        for r in tables.translations.latest()
    ]


def over_thresholds(lags: list[PartitionLag], ages: list[TranslationAge], limits: Thresholds,
                    commits: dict[tuple[str, str, int], int] | None = None) -> list[str]:
    """One line per partition or group past a limit; what cannot be known is not judged. A
    translation is stale only when the group has moved on the source since (`commits`: its
    current committed offsets); an idle group's last translation may be as old as it likes."""
    out = []
    for g in lags:
        if limits.max_lag_records is not None and g.lag_records is not None and g.lag_records > limits.max_lag_records:
            out.append(f"{g.topic}[{g.partition}]: lag {g.lag_records} records > {limits.max_lag_records}")
        if limits.max_lag_seconds is not None and g.lag_seconds is not None and g.lag_seconds > limits.max_lag_seconds:
            out.append(f"{g.topic}[{g.partition}]: lag {g.lag_seconds:.1f} s > {limits.max_lag_seconds:g} s")
    if limits.max_translation_age is not None and commits is not None:
        for a in ages:
            moved = commits.get((a.group, a.topic, a.partition), a.source_offset) != a.source_offset
            if moved and a.age_seconds > limits.max_translation_age:
                out.append(f"group {a.group} {a.topic}[{a.partition}]: committed at "
                           f"{commits[(a.group, a.topic, a.partition)]} on the source, last translated at "
                           f"{a.source_offset} {a.age_seconds:.1f} s ago > {limits.max_translation_age:g} s")
    return out
