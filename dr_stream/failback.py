"""`dr-stream failback`: bring work back to the cluster that failed, once it returns.

Run with the flow *from* the cluster that took over *to* the one coming back
(`conf/dc2-to-dc1.yaml` after dc1 failed). One command does what the white paper lists as
manual steps:

1. unreplicated records: what dc1 still holds that never reached dc2 is found and reported;
   `--include-unreplicated` copies it to dc2, otherwise it is left out for good
   (`unreplicated`);
2. copy back: the flow runs until its lag is 0, copying only what dc2 itself received: the
   copies of dc1's records are recognised by provenance and skipped, so nothing is re-copied
   or loops. With `--restore` (dc1 lost its data) the flow runs as a separate, temporary
   instance whose filter override lets dc1's own records through as well, so dc1 gets back
   everything dc2 holds;
3. groups: the groups' positions on dc2 are translated to dc1 and committed (rules of 1.6),
   copies of dc1 records mapping back to their originals exactly (`returned_records`).

Invariants: every record dc2 received during the outage reaches dc1 once; a record that
came from dc1 is never copied back (unless restoring); every step is reported with counts.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from pyspark.sql import SparkSession

from dr_stream.config import FilterOverride, FlowConfig
from dr_stream.failover import Positions, failover, format_positions
from dr_stream.groups import list_groups
from dr_stream.policy import TopicFilter, TopicRenamer
from dr_stream.topics import admin_client, cluster_id, log_bounds, matching_partitions
from dr_stream.unreplicated import UnreplicatedPartition, UnreplicatedRecords, skip_group


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

    def as_dict(self) -> dict:
        out = asdict(self)
        out["positions"] = [p.as_dict() for p in self.positions.rows]
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


def _check(config: FlowConfig) -> tuple[str, str]:
    if not TopicRenamer(config.topics.rename).is_identity():
        raise FailbackError(f"{config.path}: topics.rename: failback needs the same topic names on both "
                            f"clusters; this flow renames to {config.topics.rename!r}")
    if not config.provenance.enabled or not config.topics.preserve_partitions:
        raise FailbackError(f"{config.path}: failback needs provenance.enabled and topics.preserve_partitions, "
                            "which tell copies from originals")
    ids = []
    for cluster in (config.source, config.destination):
        try:
            ids.append(cluster_id(admin_client({**cluster.client_properties(),
                                                "socket.connection.setup.timeout.ms": "5000"}), timeout=10))
        except Exception as exc:
            raise FailbackError(f"{cluster.alias} ({cluster.bootstrap_servers}) does not answer: "
                                f"{str(exc).splitlines()[0]}") from exc
    return ids[0], ids[1]


def _remaining_records(config: FlowConfig) -> dict[str, int]:
    admin = admin_client(config.destination.client_properties())
    topics = TopicFilter(config.topics.include, config.topics.exclude)
    partitions = matching_partitions(admin, topics)
    held: dict[str, int] = {}
    for (topic, _), (start, end) in log_bounds(admin, partitions).items():
        if end > start:
            held[topic] = held.get(topic, 0) + end - start
    return held


def _end_offsets(progress) -> dict[tuple[str, int], int]:
    if not progress:
        return {}
    out = {}
    for source in progress["sources"]:
        offsets = source["endOffset"]
        offsets = json.loads(offsets) if isinstance(offsets, str) else offsets
        for topic, partitions in (offsets or {}).items():
            for partition, offset in partitions.items():
                out[(topic, int(partition))] = int(offset)
    return out


def _lag(admin, topics: TopicFilter, read: dict[tuple[str, int], int]) -> int:
    partitions = matching_partitions(admin, topics)
    bounds = log_bounds(admin, partitions)
    return sum(max(0, end - max(start, read.get(k, start))) for k, (start, end) in bounds.items())


def _query(spark: SparkSession, name: str):
    return next((q for q in spark.streams.active if q.name == name), None)


def _wait_caught_up(flow, timeout_s: float | None, log: Callable[[str], None], every_s: float = 2.0) -> float:
    """Blocks until the copy has read every record of the source and the index has read every
    record of the destination; prints progress; returns the seconds it took."""
    config = flow.config
    topics = TopicFilter(config.topics.include, config.topics.exclude)
    source_admin = admin_client(config.source.client_properties())
    dest_admin = admin_client(config.destination.client_properties())
    started = time.monotonic()
    while True:
        time.sleep(every_s)
        replicate, index = _query(flow.spark, f"replicate-{config.name}"), _query(flow.spark, f"index-{config.name}")
        progress = replicate.lastProgress if replicate else None
        lag = _lag(source_admin, topics, _end_offsets(progress)) if progress else None
        index_lag = _lag(dest_admin, topics, _end_offsets(index.lastProgress if index else None)) if lag == 0 else None
        totals = flow.progress.totals
        elapsed = time.monotonic() - started
        log(f"failback {config.source.alias} -> {config.destination.alias}: {totals['copied']} copied, "
            f"{totals['skipped_cycle']} skipped (came from {config.destination.alias}), "
            + ("first batch running" if lag is None else f"lag {lag} records")
            + ("" if index_lag in (None, 0) else f", offset index {index_lag} records behind")
            + f", {elapsed:.0f}s")
        if lag == 0 and index_lag == 0:
            return elapsed
        if timeout_s is not None and elapsed > timeout_s:
            shown = "unknown" if lag is None else lag
            raise FailbackError(f"lag still {shown} records after {timeout_s:.0f}s (--timeout); the flow's "
                                f"checkpoints under {config.streaming.checkpoint_dir} keep what was copied")


def failback(config: FlowConfig, spark: SparkSession, group_pattern: str = ".*", include_unreplicated: bool = False,
             restore: bool = False, force: bool = False, timeout_s: float | None = None,
             log: Callable[[str], None] = print) -> FailbackReport:
    from dr_stream.flow import ReplicationFlow, run_until_stopped

    source_id, dest_id = _check(config)
    src, dst = config.source.alias, config.destination.alias
    found: list[UnreplicatedPartition] = []
    if restore:
        held = _remaining_records(config)
        if held:
            shown = ", ".join(f"{t} ({n} records)" for t, n in sorted(held.items()))
            raise FailbackError(f"--restore copies everything {src} holds into empty topics, but {dst} still holds "
                                f"{shown}; delete those topics on {dst} first (mixing old and restored records "
                                "would reorder them), or fail back without --restore if that data is intact")
        dest_admin = admin_client(config.destination.client_properties())
        if skip_group(source_id) in list_groups(dest_admin):
            dest_admin.delete_consumer_groups([skip_group(source_id)])[skip_group(source_id)].result(15)
        config = restore_config(config, time.strftime("%Y%m%dT%H%M%S", time.gmtime()))
        action = f"not looked for: {dst} is being restored from {src}"
        log(f"failback {src} -> {dst}: full restore; temporary flow {config.name} with filter override "
            f"{{cluster: '.*', topic: '.*'}}, state under {config.streaming.checkpoint_dir}")
    else:
        log(f"failback {src} -> {dst}: looking for records on {dst} that never reached {src} ...")
        finder = UnreplicatedRecords(spark, config, source_id, dest_id)
        found = finder.find()
        total = sum(p.records for p in found)
        if not found:
            action = "none"
        elif include_unreplicated:
            action = f"copied to {src} ({finder.copy()} records), after what {src} received meanwhile"
        else:
            finder.leave_out(found)
            action = (f"left out: they stay on {dst} only and {dst}-to-{src} will not copy them "
                      "(--include-unreplicated copies them)")
        log(f"failback {src} -> {dst}: {total} unreplicated records: {action}")
    flow = ReplicationFlow(config, spark, log=lambda line: log(f"[{config.name}] {line}"))
    stop = threading.Event()
    runner = threading.Thread(target=run_until_stopped, args=(flow, stop), name=f"failback-{config.name}",
                              daemon=True)
    runner.start()
    try:
        seconds = _wait_caught_up(flow, timeout_s, log)
    finally:
        stop.set()
        runner.join(timeout=90)
    positions = failover(config, spark, group_pattern, force=force)
    return FailbackReport(
        flow=config.name, source=src, destination=dst, mode="restore" if restore else "resume",
        unreplicated=found, unreplicated_action=action, copied=flow.progress.totals["copied"],
        skipped=flow.progress.totals["skipped_cycle"], seconds_to_zero_lag=round(seconds, 1),
        state_dir=config.streaming.checkpoint_dir, positions=positions,
    )


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def format_failback(report: FailbackReport) -> str:
    src, dst = report.source, report.destination
    out = [f"failback {src} -> {dst} ({report.mode}, flow {report.flow})"]
    total = sum(p.records for p in report.unreplicated)
    out.append(f"unreplicated: {total} records on {dst} never reached {src}: {report.unreplicated_action}")
    for p in report.unreplicated:
        shown = ", ".join(map(str, p.offsets)) + (" ..." if p.records > len(p.offsets) else "")
        out.append(f"  {p.topic}[{p.partition}]: {p.records} records, offsets {p.first_offset}..{p.last_offset} "
                   f"({shown}), timestamps {_when(p.first_timestamp)} .. {_when(p.last_timestamp)}")
    if report.unreplicated:
        copied = report.unreplicated_action.startswith("copied")
        out.append(f"  ordering: {'on' if copied else 'copied, they would land on'} {src} after the records {src} "
                   "received meanwhile, so the partition's order would differ between the clusters; consumers "
                   "that depend on it must handle that")
    out.append(f"copied to {dst}: {report.copied} records; skipped {report.skipped} that came from {dst}; "
               f"lag 0 after {report.seconds_to_zero_lag}s")
    out.append(format_positions(report.positions))
    if report.mode == "restore":
        out.append(f"next: point producers and consumers at {dst}, then `dr-stream reset-flow` and `dr-stream run` "
                   f"the {dst}-to-{src} flow: its checkpoints and index describe {dst}'s lost data")
    else:
        out.append(f"next: point producers and consumers at {dst}, then `dr-stream run` the {dst}-to-{src} flow; "
                   f"it resumes from its checkpoint and skips what came from {src}")
    return "\n".join(out)


def reset_flow(config: FlowConfig) -> list[str]:
    """Moves a flow's checkpoints, offset index and translations aside (kept, renamed), and drops
    its left-out marks, so it starts afresh: after its source was restored from scratch."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    done = []
    for path in (config.streaming.checkpoint_dir, config.streaming.offset_index, config.streaming.translations):
        p = Path(path)
        if p.exists():
            target = p.with_name(f"{p.name}.before-{stamp}")
            shutil.move(str(p), str(target))
            done.append(f"moved {p} -> {target}")
    admin = admin_client(config.source.client_properties())
    group = skip_group(cluster_id(admin_client(config.destination.client_properties())))
    if group in list_groups(admin):
        admin.delete_consumer_groups([group])[group].result(15)
        done.append(f"deleted group {group} on {config.source.alias}")
    return done or ["nothing to reset"]
