"""Exactly once across crashes: find what a killed run already wrote, and skip it.

Spark's Kafka sink is at-least-once: after a crash the last micro-batch is replayed from
the checkpoint and records written before the crash would be written again. With
`preserve_partitions`, destination partition P receives this flow's records from source
partition P only, in origin-offset order (one producer per task, idempotent, ordered).
So the highest origin offset the offset index holds for P, once the index is level with the
destination (`index_feed.catch_up`), is the last record already copied. The marks are taken
when the replicate query (re)starts and the query keeps records above them for its whole run;
records below a mark only come again if the topic is recreated, which the flow watches for
and answers with a restart (new marks).

Invariant: the filter never drops a record that is not already in the destination, or that
the operator chose to leave out at failback (`left_out`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from confluent_kafka.admin import AdminClient
from pyspark.sql import Column
from pyspark.sql import functions as F

from dr_stream.core.config import FlowConfig
from dr_stream.core.contracts import left_out_group
from dr_stream.kafka.admin import log_bounds
from dr_stream.replication.left_out import read_left_out

if TYPE_CHECKING:
    from dr_stream.index import IndexFeed

Partition = tuple[str, int]


@dataclass(frozen=True)
class ResumeMarks:
    """Per source partition, the origin offset up to which records are skipped on resume."""

    skip_through: dict[Partition, int]
    # (partition, source log end, mark): the source ends before a mark, so the topic was
    # recreated (a full restore) and the mark says nothing about today's offsets.
    recreated: tuple[tuple[Partition, int, int], ...] = ()


def resume_marks(copied: dict[Partition, int], left_out: dict[Partition, int],
                 source_ends: dict[Partition, int]) -> ResumeMarks:
    """Combines what the destination holds with what was left out at failback (the higher wins),
    and drops every mark at or beyond its partition's source log end."""
    marks = dict(copied)
    for key, offset in left_out.items():
        marks[key] = max(offset, marks.get(key, -1))
    recreated = tuple((key, source_ends.get(key, 0), offset) for key, offset in sorted(marks.items())
                      if offset >= source_ends.get(key, 0))
    for key, _, _ in recreated:
        del marks[key]
    return ResumeMarks(marks, recreated)


def _offset_of_partition(offsets: dict[Partition, int]) -> Column:
    """The record's partition's entry in `offsets` (null for a partition not in it): one literal
    map lookup per record, fixed when the query starts, so it runs in both modes (real-time mode
    has no batch to filter on the driver) and costs no join."""
    # One SQL expression the JVM parses, not a Column per key and value: at 1,000 partitions the
    # 2,000 gateway calls took seconds of each restart. Kafka topic names hold only [a-zA-Z0-9._-].
    entries = ", ".join(f"'{t}:{p}', {int(o)}L" for (t, p), o in sorted(offsets.items()))
    return F.element_at(F.expr(f"map({entries})"), F.concat_ws(":", F.col("topic"), F.col("partition").cast("string")))


def already_copied(marks: dict[Partition, int]) -> Column:
    """True for a record at or below its partition's mark."""
    if not marks:
        return F.lit(False)
    return F.coalesce(F.col("offset") <= _offset_of_partition(marks), F.lit(False))


def in_ranges(ranges: dict[Partition, list[tuple[int, int]]]) -> Column:
    """True for a record within one of its partition's origin ranges (a handful: a partition whose
    records past a refused one were copied before the hold took effect)."""
    terms = [f"(topic = '{t}' AND partition = {int(p)} AND offset BETWEEN {int(a)}L AND {int(b)}L)"
             for (t, p), spans in sorted(ranges.items()) for a, b in spans]
    return F.expr(" OR ".join(terms)) if terms else F.lit(False)


def held_back(held: dict[Partition, int]) -> Column:
    """True for a record at or after the refused record its partition is held at (`holds`)."""
    if not held:
        return F.lit(False)
    return F.coalesce(F.col("offset") >= _offset_of_partition(held), F.lit(False))


@dataclass(frozen=True)
class Resume:
    """What a (re)started query skips, per source partition: records at or below `marks` or in
    `copied` ranges (already on the destination, or left out at failback) and, among them, those
    at or below `left_out` (left out by the operator); and records of a `held` partition from the
    refused one on, which wait for an operator (not counted: they are read again after it). The
    record path filters and counts with these expressions (`record_path.prepare`); they add no
    column, so they cost no copy of a record."""

    marks: dict[Partition, int] = field(default_factory=dict)
    left_out: dict[Partition, int] = field(default_factory=dict)
    held: dict[Partition, int] = field(default_factory=dict)
    # beyond `marks`: ranges already on the destination, of a partition read again after a hold
    copied: dict[Partition, list[tuple[int, int]]] = field(default_factory=dict)

    def dropped(self) -> Column:
        return already_copied(self.marks) | in_ranges(self.copied) if self.copied else already_copied(self.marks)

    def left(self) -> Column:
        """Dropped because it was left out at failback (topic names cannot hold ':', so
        `topic:partition` names a partition unambiguously)."""
        if not self.marks or not self.left_out:
            return F.lit(False)
        return self.dropped() & already_copied(self.left_out)

    def waiting(self) -> Column:
        return held_back(self.held)


def shown_marks(marks: dict[Partition, int], most: int = 6) -> str:
    """Marks as a log line shows them: the first few, `topic[partition]<=offset`."""
    shown = ", ".join(f"{t}[{p}]<={o}" for (t, p), o in sorted(marks.items())[:most])
    return shown + (" ..." if len(marks) > most else "")


def marks_at_start(feed: IndexFeed, config: FlowConfig, source_admin: AdminClient, destination_cluster_id: str,
                   replicated: dict[str, int], log: Callable[[str], None],
                   mark: Callable[[str], None],
                   ) -> tuple[dict[Partition, int], dict[Partition, int], dict[Partition, tuple[int, int]]]:
    """The marks a (re)starting query skips through, the left-out marks among them, and the
    partitions whose source ends at or below their mark ((log end, mark)), each said in a line.
    The index, once level with the destination (`catch_up`, a phase of `mark`), knows the last
    origin offset copied to each partition: no scan of the destination from its end."""
    feed.catch_up(mark)
    copied = {k: o for k, o in feed.last_copied().items() if k[0] in replicated}
    if feed.unscanned:
        unread = {k: first for k, (first, _) in feed.unscanned.items()}
        log(f"(re)start: at-least-once for {len(unread)} destination partitions whose newest copies were "
            f"not read (from offsets {shown_marks(unread)}): records copied there before the stop may be "
            "written again")
    left_out = read_left_out(config.source, destination_cluster_id,
                             ((t, p) for t, n in replicated.items() for p in range(n)))
    if left_out:
        log(f"records left out at failback are not copied ({shown_marks(left_out)}; group "
            f"{left_out_group(destination_cluster_id)} on {config.source.alias})")
    wanted = set(copied) | set(left_out)
    ends = {k: end for k, (_, end) in log_bounds(source_admin, sorted(wanted)).items()}
    marks = resume_marks(copied, left_out, ends)
    for (topic, partition), end, offset in marks.recreated:
        log(f"{topic}[{partition}] ends at {end}, below origin offset {offset} already handled: the source took "
            "records back (or the topic was recreated), so nothing is skipped there")
    if marks.skip_through:
        log(f"(re)start: origin offsets {shown_marks(marks.skip_through)} are already on the destination (or "
            "were left out), so records at or below them are skipped, not written twice")
    return marks.skip_through, left_out, {key: (end, offset) for key, end, offset in marks.recreated}
