"""`dr-stream translate` and `dr-stream failover`: move consumer groups to the destination.

Where each group stood on the source comes from the source itself when it still answers
(a planned failover), or else from the last positions the flow recorded in its translation
log (the source is gone). Either way the position is translated through the offset index as
it is now (`index_snapshot`: the table, the runs published since, the destination's tail),
clamped to the destination's logs, and, for `failover`, committed under the rules of
`group_sync`. No JVM is started: the tables are read with `deltalake` (`flow_tables`).

Invariant: every partition of every matching group is reported with an action, including
the ones that were skipped, clamped, or translated by the timestamp fallback.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from dr_stream.core.config import FlowConfig
from dr_stream.index import index_snapshot
from dr_stream.kafka.cluster_context import FlowClusters
from dr_stream.kafka.group_offsets.kafka4 import Kafka4Groups, StreamsGroupStates
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.positions import (
    GroupCommit,
    GroupsRead,
    GroupSync,
    OffsetTranslator,
    RecordTimestamps,
    ReturnedRecords,
    Synced,
    Translation,
    current_commits,
    maps_back,
    stamped,
    sync_translations,
)


@dataclass(frozen=True)
class GroupPosition:
    """A translation and what was done with it."""

    translation: Translation
    action: Synced

    def as_dict(self) -> dict[str, Any]:
        # Every field is a plain value: a shallow copy is asdict's answer, without its deep copies
        # (a second a failover of 10,000 positions).
        return {**vars(self.translation), "action": self.action.text, "unreplicated": self.translation.unreplicated}


@dataclass(frozen=True)
class Positions:
    rows: list[GroupPosition]
    source_reachable: bool
    origin: str  # where the source positions came from
    origin_cluster: str | None = None  # the source's cluster.id, as far as known


@dataclass(frozen=True)
class SourcePositions:
    """Where the groups stood on the source, and what is known of the source from there."""

    commits: list[GroupCommit]
    origin_cluster: str | None
    origin: str
    live: bool
    known_ends: dict[tuple[str, int], int]


def _live_positions(config: FlowConfig, clusters: FlowClusters, source_id: str, group_pattern: str,
                    forward_except: str | None, streams: StreamsGroupStates | None) -> SourcePositions:
    commits = current_commits(clusters.source.group_offsets, clusters.source.admin, config.group_filter,
                              config.topic_filter, group_pattern, forward_except,
                              sorted(streams.listed()) if streams else ())
    timestamps = RecordTimestamps(clusters.source, shared=True)
    try:
        commits = stamped(commits, timestamps)
    finally:
        timestamps.close()
    return SourcePositions(commits, source_id, f"committed offsets on {config.source.alias} (live)", True, {})


def _recorded_positions(config: FlowConfig, tables: FlowTables, group_pattern: str) -> SourcePositions:
    commits = [c for c in tables.translations.last_commits()
               if config.group_filter.matches(c.group) and re.fullmatch(group_pattern, c.group)]
    origin = (f"{config.source.alias} is unreachable: last positions recorded by the flow "
              f"in {config.streaming.translations}")
    return SourcePositions(commits, tables.index.newest_origin_cluster(), origin, False,
                           tables.translations.last_source_ends())


def source_positions(config: FlowConfig, tables: FlowTables, clusters: FlowClusters, group_pattern: str = ".*",
                     streams: StreamsGroupStates | None = None) -> SourcePositions:
    """Live from the source when it answers, else the positions the flow last recorded. Live,
    a flow that forwards (a chain's hop) also takes the positions dr-stream synced to the source
    from elsewhere than the destination, as its poller does, and the groups `streams` lists
    (the source's Streams groups, which librdkafka's listing leaves out)."""
    source_id = clusters.source.reachable_id()
    if source_id is None:
        return _recorded_positions(config, tables, group_pattern)
    forward_except = clusters.destination.cluster_id() if config.provenance.forward else None
    return _live_positions(config, clusters, source_id, group_pattern, forward_except, streams)


def translate_positions(config: FlowConfig, tables: FlowTables, group_pattern: str = ".*",
                        log: Callable[[str], None] = print, helper: Kafka4Groups | None = None,
                        clusters: FlowClusters | None = None,
                        found: Callable[[SourcePositions], None] = lambda positions: None) -> Positions:
    """Each selected group's position on the source, translated. With `offsets.streams_groups`,
    the source's Streams groups are listed through `helper` (one of its own when None). The
    clusters' contexts are the command's (each cluster's id asked once, one admin client each),
    or the call's own. `found` hears the source positions before they are translated (a failover
    reads the destination's groups meanwhile)."""
    own_clusters = clusters is None
    clusters = clusters or FlowClusters.of(config, tables.spark)
    own = Kafka4Groups([config.source]) if helper is None and config.offsets.streams_groups else None
    try:
        clusters.destination.cluster_id()  # a destination that is not the flow's is refused first
        groups = helper or own
        streams = StreamsGroupStates(groups, config.source) if groups else None
        positions = source_positions(config, tables, clusters, group_pattern, streams)
        found(positions)
        translations = translate_source_positions(config, tables, clusters, positions, log)
    finally:
        if own is not None:
            own.close()
        if own_clusters:
            clusters.close()
    return Positions([GroupPosition(t, Synced(None, "")) for t in translations], positions.live, positions.origin,
                     positions.origin_cluster)


def translate_source_positions(config: FlowConfig, tables: FlowTables, clusters: FlowClusters,
                               positions: SourcePositions, log: Callable[[str], None]) -> list[Translation]:
    """Source positions (a group's commits, or offsets an application kept itself) translated
    through the offset index as it is now."""
    destination_id = clusters.destination.cluster_id()
    returned = None
    if positions.live and maps_back(config):
        returned = ReturnedRecords(clusters.source, config.provenance.header, destination_id,
                                   destination=clusters.destination, shared=True,
                                   on_unconfirmed=lambda topic, line: log(line))
    # per destination partition a position lands on, and per source partition the lowest offset
    # asked there: what the index snapshot reads
    dests: set[tuple[str, int]] = set()
    asked: dict[tuple[str, int], int] = {}
    highest: dict[tuple[str, int], int] = {}
    for c in positions.commits:
        dests.add((config.renamer.format_remote_topic(c.topic), c.partition))
        asked[(c.topic, c.partition)] = min(c.offset, asked.get((c.topic, c.partition), c.offset))
        highest[(c.topic, c.partition)] = max(c.offset, highest.get((c.topic, c.partition), c.offset))
    store = index_snapshot(config, tables.index, positions.origin_cluster, dests, clusters.destination, log,
                           asked=asked, highest=highest)
    translator = OffsetTranslator(store.locate, config.renamer, clusters.destination,
                                  source=clusters.source if positions.live else None,
                                  known_source_ends=positions.known_ends, returned=returned, shared=True,
                                  header=config.provenance.header)
    try:
        return translator.translate(positions.commits)
    finally:
        translator.close()


def failover(config: FlowConfig, tables: FlowTables, group_pattern: str = ".*", dry_run: bool = False,
             force: bool = False, log: Callable[[str], None] = print, clusters: FlowClusters | None = None
             ) -> Positions:
    """Translates and commits; `clusters`: the command's contexts (a drill's), else the call's own."""
    if clusters is not None:
        return _failover(config, tables, clusters, group_pattern, dry_run, force, log)
    with FlowClusters.of(config, tables.spark) as own:
        return _failover(config, tables, own, group_pattern, dry_run, force, log)


def _failover(config: FlowConfig, tables: FlowTables, clusters: FlowClusters, group_pattern: str, dry_run: bool,
              force: bool, log: Callable[[str], None]) -> Positions:
    # A Streams group running on the destination is absent to librdkafka's describe, and the
    # source's are absent to its listing: with `offsets.streams_groups` Kafka 4's admin API (one
    # helper JVM for both clusters, started only when first asked) tells them, so a Streams group
    # is moved, and skipped while it runs on the destination, like a consumer group.
    helper = Kafka4Groups([config.source, config.destination]) if config.offsets.streams_groups else None
    syncs: list[tuple[GroupSync, Future[GroupsRead]]] = []

    def read_destination_groups(found: SourcePositions) -> None:
        # The groups' states and offsets are read while their positions are translated: reading
        # before deciding is as safe as right before (`GroupSync.read_ahead`).
        groups = {c.group for c in found.commits}
        offsets = clusters.destination.group_offsets
        offsets.expect(len(groups))
        sync = GroupSync(clusters.destination, config.name, origin=found.origin_cluster, offsets=offsets,
                         streams=StreamsGroupStates(helper, config.destination) if helper else None)
        partitions = {(config.renamer.format_remote_topic(c.topic), c.partition) for c in found.commits}
        syncs.append((sync, sync.read_ahead(groups, partitions)))

    try:
        positions = translate_positions(config, tables, group_pattern, log, helper, clusters,
                                        found=read_destination_groups)
        translations = [p.translation for p in positions.rows]
        sync, seen = syncs[0]
        actions = sync_translations(sync, translations, force, dry_run, seen=seen)
    finally:
        for sync, _ in syncs:
            sync.close()
        if helper is not None:
            helper.close()
    rows = [GroupPosition(t, actions[t.key]) for t in sorted(translations, key=lambda t: t.key)]
    return Positions(rows, positions.source_reachable, positions.origin, positions.origin_cluster)
