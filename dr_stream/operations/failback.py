"""`dr-stream failback`: bring work back to the cluster that failed, once it returns.

Run with the flow *from* the cluster that took over *to* the one coming back
(`conf/dc2-to-dc1.yaml` after dc1 failed). One command does what would otherwise be a list of
manual steps:

1. unreplicated records: what dc1 still holds that never reached dc2 is found and reported;
   `--include-unreplicated` copies it to dc2, otherwise it is left out for good
   (`unreplicated`);
2. copy back: the flow runs until its lag is 0, copying only what dc2 itself received: the
   copies of dc1's records are recognised by provenance and skipped, so nothing is re-copied
   or loops. With `--restore` (dc1 lost its data) the flow runs as a separate, temporary
   instance whose filter override lets dc1's own records through as well, so dc1 gets back
   everything dc2 holds;
3. groups: the groups' positions on dc2 are translated to dc1 and committed under the sync
   rules, copies of dc1 records mapping back to their originals exactly (`returned_records`);
4. Spark checkpoints (`--spark-checkpoint`): the queries' own positions on dc2, rewritten in
   their checkpoints by the same rules (`spark_checkpoint`), once the copy back is complete.

Invariants: every record dc2 received during the outage reaches dc1 once; a record that
came from dc1 is never copied back (unless restoring); every step is reported with counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from dr_stream.core.config import FilterOverride, FlowConfig
from dr_stream.core.lag import spark_offsets, total_behind
from dr_stream.core.policy import TopicFilter
from dr_stream.kafka.admin import log_bounds, matching_partitions
from dr_stream.kafka.cluster_context import FlowClusters
from dr_stream.operations.failover import Positions, failover
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.operations.spark_checkpoint import CheckpointError, CheckpointMove, move_checkpoint
from dr_stream.operations.unreplicated import UnreplicatedPartition, UnreplicatedRecords
from dr_stream.replication.flow import ReplicationFlow, build_flow
from dr_stream.replication.left_out import forget_left_out
from dr_stream.replication.supervisor import running_in_background


class FailbackError(RuntimeError):
    """A precondition failed; the message is one line saying which and what to do."""


@dataclass(frozen=True)
class FailbackReport:
    flow: str
    source: str
    destination: str
    mode: str  # "resume" or "restore"
    unreplicated: list[UnreplicatedPartition]
    unreplicated_action: str
    copied: int
    skipped: int
    seconds_to_zero_lag: float
    state_dir: str
    positions: Positions
    checkpoints: list[CheckpointMove] = field(default_factory=list)
    checkpoints_refused: list[str] = field(default_factory=list)  # one line each
    # the unreplicated records were copied back (`unreplicated_action` says so in words)
    unreplicated_copied: bool = False

    @property
    def failed(self) -> bool:
        return bool(self.checkpoints_refused)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["positions"] = [p.as_dict() for p in self.positions.rows]
        out["checkpoints"] = [move.as_dict() for move in self.checkpoints]
        return out


def restore_config(config: FlowConfig, stamp: str) -> FlowConfig:
    """The temporary instance of a full restore: every record passes the provenance filter, and
    its checkpoints, index and translations are new (the flow's own state describes the past)."""
    streaming = config.streaming
    suffix = f"-restore-{stamp}"
    return replace(
        config,
        name=f"{config.name}-restore",
        provenance=replace(config.provenance, filter_overrides=(FilterOverride(cluster=".*", topic=".*"),)),
        streaming=replace(streaming, checkpoint_dir=streaming.checkpoint_dir.rstrip("/") + suffix,
                          offset_index=streaming.offset_index.rstrip("/") + suffix,
                          translations=streaming.translations.rstrip("/") + suffix),
    )


def check_preconditions(config: FlowConfig, clusters: FlowClusters) -> tuple[str, str]:
    """Failback's demands on the flow and both clusters; returns (source, destination) cluster.ids."""
    if not config.renamer.is_identity():
        raise FailbackError(f"{config.path}: topics.rename: failback needs the same topic names on both "
                            f"clusters; this flow renames to {config.topics.rename!r}")
    if not config.capabilities.exactly_once:
        raise FailbackError(f"{config.path}: failback needs provenance.enabled and topics.preserve_partitions, "
                            "which tell copies from originals")
    return clusters.source.cluster_id(), clusters.destination.cluster_id()


def _remaining_records(config: FlowConfig, admin: AdminClient) -> dict[str, int]:
    held: dict[str, int] = {}
    for (topic, _), (start, end) in log_bounds(admin, matching_partitions(admin, config.topic_filter)).items():
        if end > start:
            held[topic] = held.get(topic, 0) + end - start
    return held


def _lag(admin: AdminClient, topics: TopicFilter, progress: dict[str, Any] | None) -> int:
    """Records of the selected topics on `admin`'s cluster beyond what a query's progress read."""
    bounds = log_bounds(admin, matching_partitions(admin, topics))
    sources = progress["sources"] if progress else []
    return total_behind(bounds, {k: o for s in sources for k, o in spark_offsets(s["endOffset"]).items()})


def _progress(spark: SparkSession, name: str) -> dict[str, Any] | None:
    query = next((q for q in spark.streams.active if q.name == name), None)
    return query.lastProgress if query else None


def _wait_caught_up(flow: ReplicationFlow, timeout_s: float | None, log: Callable[[str], None],
                    running: Callable[[], None], every_s: float = 2.0) -> float:
    """Blocks until the copy has read every record of the source, then brings the offset index
    level with it (every run published by then, in the table); prints progress; returns the
    seconds it took. `running` raises when the flow's runner has failed."""
    config = flow.config
    source_admin = flow.clusters.source.admin
    started = time.monotonic()
    while True:
        time.sleep(every_s)
        running()
        copied = _progress(flow.spark, config.replicate_query)
        lag = _lag(source_admin, config.topic_filter, copied) if copied else None
        totals = flow.progress.totals
        elapsed = time.monotonic() - started
        log(f"failback {config.source.alias} -> {config.destination.alias}: {totals['copied']} copied, "
            f"{totals['skipped_cycle']} skipped (came from {config.destination.alias}), "
            + ("first batch running" if lag is None else f"lag {lag} records") + f", {elapsed:.0f}s")
        if lag == 0:
            if flow.feed is not None:
                flow.feed.catch_up()  # a batch's runs are published before it commits: all of them are there
                flow.feed.write()  # and in the table, which the failover after the failback reads
            return time.monotonic() - started
        if timeout_s is not None and elapsed > timeout_s:
            shown = "unknown" if lag is None else lag
            raise FailbackError(f"lag still {shown} records after {timeout_s:.0f}s (--timeout); the flow's "
                                f"checkpoints under {config.streaming.checkpoint_dir} keep what was copied")


def _prepare_restore(config: FlowConfig, clusters: FlowClusters, source_id: str,
                     log: Callable[[str], None]) -> tuple[FlowConfig, str]:
    src, dst = config.source.alias, config.destination.alias
    held = _remaining_records(config, clusters.destination.admin)
    if held:
        shown = ", ".join(f"{t} ({n} records)" for t, n in sorted(held.items()))
        raise FailbackError(f"--restore copies everything {src} holds into empty topics, but {dst} still holds "
                            f"{shown}; delete those topics on {dst} first (mixing old and restored records "
                            "would reorder them), or fail back without --restore if that data is intact")
    forget_left_out(clusters.destination.admin, source_id)
    config = restore_config(config, time.strftime("%Y%m%dT%H%M%S", time.gmtime()))
    log(f"failback {src} -> {dst}: full restore; temporary flow {config.name} with filter override "
        f"{{cluster: '.*', topic: '.*'}}, state under {config.streaming.checkpoint_dir}")
    return config, f"not looked for: {dst} is being restored from {src}"


def _handle_unreplicated(config: FlowConfig, spark: SparkSession, clusters: FlowClusters, ids: tuple[str, str],
                         include: bool, log: Callable[[str], None]) -> tuple[list[UnreplicatedPartition], str]:
    """The records on the destination that never reached the source, and what was done with
    them: copied back when `include` (and found), else left out."""
    src, dst = config.source.alias, config.destination.alias
    log(f"failback {src} -> {dst}: looking for records on {dst} that never reached {src} ...")
    finder = UnreplicatedRecords(spark, config, *ids, destination_admin=clusters.destination.admin)
    found = finder.find()
    if not found:
        action = "none"
    elif include:
        action = f"copied to {src} ({finder.copy()} records), after what {src} received meanwhile"
    else:
        finder.leave_out(found)
        action = (f"left out: they stay on {dst} only and {dst}-to-{src} will not copy them "
                  "(--include-unreplicated copies them)")
    log(f"failback {src} -> {dst}: {sum(p.records for p in found)} unreplicated records: {action}")
    return found, action


def _copy_back(config: FlowConfig, spark: SparkSession, clusters: FlowClusters, timeout_s: float | None,
               log: Callable[[str], None]) -> tuple[ReplicationFlow, float]:
    """Runs the flow until it has caught up; returns it (for its totals) and the seconds it took."""
    flow = build_flow(config, spark, log=lambda line: log(f"[{config.name}] {line}"), clusters=clusters)
    with running_in_background(flow, join_s=90) as runner:
        return flow, _wait_caught_up(flow, timeout_s, log, runner.check)


def failback(config: FlowConfig, spark: SparkSession, group_pattern: str = ".*", include_unreplicated: bool = False,
             restore: bool = False, force: bool = False, timeout_s: float | None = None,
             log: Callable[[str], None] = print, spark_checkpoints: Sequence[str] = ()) -> FailbackReport:
    # Each cluster's id and clients, once for every step. A restore's destination was rebuilt, so
    # its id may be new: the restore's own flow records it in a state of its own.
    with FlowClusters.of(config, lambda: spark, unchecked=("destination",) if restore else ()) as clusters:
        return _failback(config, spark, clusters, group_pattern, include_unreplicated, restore, force, timeout_s,
                         log, spark_checkpoints)


def _move_checkpoints(config: FlowConfig, tables: FlowTables, spark: SparkSession, clusters: FlowClusters,
                      uris: Sequence[str], log: Callable[[str], None]) -> tuple[list[CheckpointMove], list[str]]:
    """Each checkpoint moved back, or the one line saying why not."""
    moves, refused = [], []
    for uri in uris:
        try:
            moves.append(move_checkpoint(config, tables, spark, uri, log=log, clusters=clusters))
        except CheckpointError as exc:
            refused.append(str(exc))
            log(f"failback {config.source.alias} -> {config.destination.alias}: checkpoint refused: {exc}")
    return moves, refused


def _failback(config: FlowConfig, spark: SparkSession, clusters: FlowClusters, group_pattern: str,
              include_unreplicated: bool, restore: bool, force: bool, timeout_s: float | None,
              log: Callable[[str], None], spark_checkpoints: Sequence[str]) -> FailbackReport:
    ids = check_preconditions(config, clusters)
    src, dst = config.source.alias, config.destination.alias
    found: list[UnreplicatedPartition] = []
    copied_back = False
    if restore:
        config, action = _prepare_restore(config, clusters, ids[0], log)
    else:
        found, action = _handle_unreplicated(config, spark, clusters, ids, include_unreplicated, log)
        copied_back = include_unreplicated and bool(found)
    flow, seconds = _copy_back(config, spark, clusters, timeout_s, log)
    tables = FlowTables.of(config, lambda: spark, log)
    positions = failover(config, tables, group_pattern, force=force, log=log, clusters=clusters)
    moves, refused = _move_checkpoints(config, tables, spark, clusters, spark_checkpoints, log)
    return FailbackReport(
        flow=config.name, source=src, destination=dst, mode="restore" if restore else "resume",
        unreplicated=found, unreplicated_action=action, copied=flow.progress.totals["copied"],
        skipped=flow.progress.totals["skipped_cycle"], seconds_to_zero_lag=round(seconds, 1),
        state_dir=config.streaming.checkpoint_dir, positions=positions, checkpoints=moves,
        checkpoints_refused=refused, unreplicated_copied=copied_back,
    )
