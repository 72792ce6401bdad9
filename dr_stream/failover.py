"""`dr-stream translate` and `dr-stream failover`: move consumer groups to the destination.

Where each group stood on the source comes from the source itself when it still answers
(a planned failover), or else from the last positions the flow recorded in its translation
log (the source is gone). Either way the position is translated through the offset index as
it is now, clamped to the destination's logs, and, for `failover`, committed under the
rules of `offset_sync`.

Invariant: every partition of every matching group is reported with an action, including
the ones that were skipped, clamped, or translated by the timestamp fallback.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dr_stream.config import FlowConfig
from dr_stream.consumer_timestamps import GroupCommit, RecordTimestamps
from dr_stream.group_poller import current_commits
from dr_stream.index import OffsetIndex
from dr_stream.offset_sync import OffsetSync
from dr_stream.policy import GroupFilter, TopicFilter, TopicRenamer
from dr_stream.returned_records import ReturnedRecords
from dr_stream.topics import admin_client, cluster_id
from dr_stream.translate import OffsetTranslator, Translation
from dr_stream.translation_log import TranslationLog


@dataclass(frozen=True)
class GroupPosition:
    """A translation and what was done with it."""

    translation: Translation
    action: str

    def as_dict(self) -> dict:
        return {**asdict(self.translation), "action": self.action, "unreplicated": self.translation.unreplicated}


@dataclass(frozen=True)
class Positions:
    rows: list[GroupPosition]
    source_reachable: bool
    origin: str  # where the source positions came from


def _source_commits(config: FlowConfig, group_pattern: str) -> list[GroupCommit] | None:
    """Live positions from the source, or None when the source does not answer."""
    try:
        admin = admin_client({**config.source.client_properties(), "socket.connection.setup.timeout.ms": "5000"})
        admin.list_topics(timeout=5)
    except Exception:
        return None
    groups = GroupFilter(config.offsets.groups.include, config.offsets.groups.exclude)
    topics = TopicFilter(config.topics.include, config.topics.exclude)
    commits = current_commits(admin, groups, topics, group_pattern)
    stamps = RecordTimestamps(config.source.client_properties())
    try:
        return [GroupCommit(c.group, c.topic, c.partition, c.offset, stamps.before(c.topic, c.partition, c.offset))
                for c in commits]
    finally:
        stamps.close()


def maps_back(config: FlowConfig) -> bool:
    """Whether copies of destination records on the source translate to their originals. Not for
    a flow with filter overrides: it copies destination records back (a full restore), so the
    originals' offsets may be gone."""
    return not config.provenance.filter_overrides


def _newest_origin(index: OffsetIndex) -> str | None:
    row = index.runs().groupBy("origin_cluster").agg(F.max("copied_at").alias("at")).orderBy(F.desc("at")).first()
    return row["origin_cluster"] if row else None


def translate_positions(config: FlowConfig, spark: SparkSession, group_pattern: str = ".*") -> Positions:
    index = OffsetIndex(spark, config.streaming.offset_index)
    groups = GroupFilter(config.offsets.groups.include, config.offsets.groups.exclude)
    live = _source_commits(config, group_pattern)
    known_ends: dict[tuple[str, int], int] = {}
    returned = None
    if live is not None and maps_back(config):
        returned = ReturnedRecords(config.source.client_properties(), config.provenance.header,
                                   cluster_id(admin_client(config.destination.client_properties())))
    if live is not None:
        origin_cluster = cluster_id(admin_client(config.source.client_properties()), timeout=5)
        commits, origin = live, f"committed offsets on {config.source.alias} (live)"
    else:
        log = TranslationLog(spark, config.streaming.translations)
        recorded = log.last_commits()
        known_ends = log.last_source_ends()
        commits = [c for c in recorded if groups.matches(c.group) and re.fullmatch(group_pattern, c.group)]
        origin_cluster = _newest_origin(index)
        origin = (f"{config.source.alias} is unreachable: last positions recorded by the flow "
                  f"in {config.streaming.translations}")
    translator = OffsetTranslator(
        spark, index, TopicRenamer(config.topics.rename), config.destination.client_properties(),
        source=config.source.client_properties() if live is not None else None, origin_cluster=origin_cluster,
        known_source_ends=known_ends, returned=returned,
    )
    try:
        translations = translator.translate(commits)
    finally:
        translator.close()
    return Positions([GroupPosition(t, "") for t in translations], live is not None, origin)


def failover(config: FlowConfig, spark: SparkSession, group_pattern: str = ".*", dry_run: bool = False,
             force: bool = False) -> Positions:
    positions = translate_positions(config, spark, group_pattern)
    sync = OffsetSync(config.destination.client_properties(), config.name)
    by_group: dict[str, list[Translation]] = {}
    for p in positions.rows:
        by_group.setdefault(p.translation.group, []).append(p.translation)
    rows = []
    for group, items in sorted(by_group.items()):
        actions = {t.key: f"skipped: not translated ({t.note})" for t in items if t.offset is None}
        wanted = {(t.dest_topic, t.dest_partition): t.offset for t in items if t.offset is not None}
        if wanted:
            try:
                done = {(a.topic, a.partition): a.action for a in sync.apply(group, wanted, force, dry_run)}
            except Exception as exc:
                done = {k: f"failed: {str(exc).splitlines()[0]}" for k in wanted}
            for t in items:
                if t.offset is not None:
                    actions[t.key] = done[(t.dest_topic, t.dest_partition)]
        rows.extend(GroupPosition(t, actions[t.key]) for t in items)
    return Positions(rows, positions.source_reachable, positions.origin)


def format_positions(positions: Positions) -> str:
    header = ("group", "topic", "part", "source offset", "translated", "dest log start", "dest log end",
              "method", "action")
    lines = [header]
    notes = []
    for p in positions.rows:
        t = p.translation
        lines.append((t.group, t.dest_topic, str(t.partition), str(t.source_offset), _text(t.offset),
                      _text(t.log_start), _text(t.log_end), t.method, p.action or "-"))
        if t.note:
            notes.append(f"  {t.group} {t.dest_topic}[{t.partition}]: {t.note}")
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    out = [f"source positions: {positions.origin}"]
    out += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in lines]
    if notes:
        out += ["reported:", *notes]
    lost = {(p.translation.topic, p.translation.partition): p.translation for p in positions.rows
            if p.translation.unreplicated}
    for (topic, partition), t in sorted(lost.items()):
        out.append(f"RPO: {topic}[{partition}] has {t.unreplicated} records on the source that were never "
                   f"copied (origin offsets {t.last_copied + 1 if t.last_copied is not None else 0}.."
                   f"{t.source_log_end - 1}); the groups resume after the last copied record")
    if not positions.rows:
        out.append("(no matching group positions)")
    return "\n".join(out)


def _text(value: int | None) -> str:
    return "-" if value is None else str(value)
