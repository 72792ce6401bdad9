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

from dataclasses import dataclass, field

from pyspark.sql import Column
from pyspark.sql import functions as F

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


def already_copied(marks: dict[Partition, int]) -> Column:
    """True for a record at or below its partition's mark: one literal map lookup per record,
    fixed when the query starts, so it runs in both modes (real-time mode has no batch to
    filter on the driver) and costs no join."""
    if not marks:
        return F.lit(False)
    # One SQL expression the JVM parses, not a Column per key and value: at 1,000 partitions the
    # 2,000 gateway calls took seconds of each restart. Kafka topic names hold only [a-zA-Z0-9._-].
    entries = ", ".join(f"'{t}:{p}', {int(o)}L" for (t, p), o in sorted(marks.items()))
    mark = F.element_at(F.expr(f"map({entries})"), F.concat_ws(":", F.col("topic"), F.col("partition").cast("string")))
    return F.coalesce(F.col("offset") <= mark, F.lit(False))


@dataclass(frozen=True)
class Resume:
    """What a (re)started query skips, per source partition: records at or below `marks`
    (already on the destination, or left out at failback) and, among them, those at or below
    `left_out` (left out by the operator). The record path filters and counts with these
    expressions (`record_path.prepare`); they add no column, so they cost no copy of a record."""

    marks: dict[Partition, int] = field(default_factory=dict)
    left_out: dict[Partition, int] = field(default_factory=dict)

    def dropped(self) -> Column:
        return already_copied(self.marks)

    def left(self) -> Column:
        """Dropped because it was left out at failback (topic names cannot hold ':', so
        `topic:partition` names a partition unambiguously)."""
        if not self.marks or not self.left_out:
            return F.lit(False)
        return self.dropped() & already_copied(self.left_out)


def shown_marks(marks: dict[Partition, int], most: int = 6) -> str:
    """Marks as a log line shows them: the first few, `topic[partition]<=offset`."""
    shown = ", ".join(f"{t}[{p}]<={o}" for (t, p), o in sorted(marks.items())[:most])
    return shown + (" ..." if len(marks) > most else "")
