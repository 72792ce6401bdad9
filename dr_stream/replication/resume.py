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

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from confluent_kafka.admin import AdminClient
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.classic.column import Column as JvmColumn

from dr_stream.core.config import FlowConfig
from dr_stream.core.contracts import left_out_group
from dr_stream.kafka.admin import log_bounds
from dr_stream.replication.checkpoint_positions import next_to_read
from dr_stream.replication.left_out import read_left_out
from dr_stream.runtime.jvm_classes import active_context, jvm_class

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dr_stream.index import IndexFeed

Partition = tuple[str, int]
# per source partition, inclusive origin offset ranges
Ranges = dict[Partition, list[tuple[int, int]]]
V = TypeVar("V")


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


@dataclass(frozen=True)
class Unwritten:
    """Resume marks lowered to the first record a failed write left out, with what stands copied
    past it: `marks` and `copied` for `Resume`; `missing`, per partition lowered, (its first
    record not on the destination, the last copied one) for the log."""

    marks: dict[Partition, int]
    copied: Ranges
    missing: dict[Partition, tuple[int, int]]


def first_missing(read_from: int, mark: int, copied: Iterable[tuple[int, int]]) -> int | None:
    """The first offset in [read_from, mark] that no copied range (inclusive) holds; None when
    every one is held."""
    nxt = read_from
    for a, b in sorted(copied):
        if a > nxt:
            break
        nxt = max(nxt, b + 1)
    return nxt if nxt <= mark else None


def unwritten_below(marks: dict[Partition, int], read: dict[Partition, int], copied: Ranges,
                    copied_from: Callable[[Partition, int], list[tuple[int, int]]],
                    left_out: Mapping[Partition, int] | None = None) -> Unwritten:
    """The marks a (re)starting query may skip through, where a write failed below the last copy.

    The producer fails a batch that cannot be written (a refused record, a delivery timeout
    through a long outage) and may still write the batches behind it, so the last copied offset
    is not proof that every record below it was copied. What the query reads again from its
    checkpoint (`read`: per partition, its next offset) up to its mark is checked against the
    offset index (`copied_from`): a partition with a record there that no run copied is read from
    that record, and the ranges copied past it are skipped (`copied`, joined with those already
    given). A record filtered out (a cycle, a transaction marker) looks the same and is only read
    and filtered again. Offsets below the checkpoint's position are never read again, so are not
    looked at, nor are those an operator left out at failback (`left_out`: through that offset)."""
    marks, copied, missing = dict(marks), {k: list(v) for k, v in copied.items()}, {}
    for key, mark in sorted(marks.items()):
        start = read.get(key)
        if start is None:
            continue
        start = max(start, (left_out or {}).get(key, -1) + 1)
        if start > mark:
            continue
        known = copied_from(key, start)
        first = first_missing(start, mark, known)
        if first is None:
            continue
        marks[key] = first - 1
        copied[key] = disjoint([*copied.get(key, []), *((max(a, first), b) for a, b in known if b >= first)])
        missing[key] = (first, mark)
    return Unwritten(marks, copied, missing)


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
    # Past the highest mark (every record once a query has read past its restart's span) a
    # record costs one comparison, not the map lookup: the generated code stops at a false term.
    return (F.col("offset") <= F.lit(max(marks.values()))) & F.coalesce(
        F.col("offset") <= _offset_of_partition(marks), F.lit(False))


def in_ranges(ranges: dict[Partition, list[tuple[int, int]]]) -> Column:
    """True for a record within one of its partition's origin ranges (inclusive). dr-stream's Java
    function (`io.drstream.spark.CopiedRanges`): a hash lookup and a binary search per record,
    compiled into the record path's stage however many ranges there are (an active-active flow
    has one between every two records it filtered out)."""
    merged = {key: disjoint(spans) for key, spans in ranges.items() if spans}
    if not merged:
        return F.lit(False)
    context = active_context()
    # One text in one gateway call: a call per range took seconds at tens of thousands of ranges.
    # Kafka's topic names hold only [a-zA-Z0-9._-], so a blank parts the fields.
    text = "\n".join(f"{t} {int(p)} {int(a)} {int(b)}" for (t, p), spans in sorted(merged.items()) for a, b in spans)
    within = JvmColumn(jvm_class(context, "io.drstream.spark.RecordPathColumns").inCopiedRanges(
        jvm_class(context, "io.drstream.spark.CopiedRanges").parse(text), F.col("topic")._jc, F.col("partition")._jc,
        F.col("offset")._jc))
    # Once a query has read past the ranges (they lie in what it reads again first), a record
    # costs one comparison: the generated code does not call the function past a false term.
    return (F.col("offset") <= F.lit(max(b for spans in merged.values() for _, b in spans))) & within


def disjoint(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive ranges, sorted and with overlapping or adjoining ones joined."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


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

    def drops_any(self) -> bool:
        """Whether `dropped` can be true for any record."""
        return bool(self.marks or any(self.copied.values()))

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


def shown_partitions(entries: Mapping[Partition, V], shown: Callable[[str, int, V], str], most: int = 6) -> str:
    """Per-partition entries as a log line shows them: the first `most` in partition order, each
    as `shown` gives it, then ` ...` when there are more (a line stays one line at any size)."""
    text = ", ".join(shown(t, p, v) for (t, p), v in sorted(entries.items())[:most])
    return text + (" ..." if len(entries) > most else "")


def shown_marks(marks: Mapping[Partition, int]) -> str:
    """Marks as a log line shows them, `topic[partition]<=offset`."""
    return shown_partitions(marks, lambda t, p, o: f"{t}[{p}]<={o}")


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


def unwritten_at_start(spark: SparkSession, checkpoint: str, feed: IndexFeed, marks: dict[Partition, int],
                       left_out: dict[Partition, int], copied: Ranges, starts: dict[Partition, int],
                       log: Callable[[str], None],
                       counted: Callable[[int], None]) -> tuple[dict[Partition, int], Ranges]:
    """`unwritten_below` for a query about to start from `checkpoint`, each partition lowered said
    in a line and `counted`; a held or released partition's start (`starts`, updated) moves down
    with it."""
    found = unwritten_below(marks, next_to_read(spark, checkpoint), copied, feed.copied_from, left_out)
    for key, (first, _) in found.missing.items():
        if key in starts:
            starts[key] = min(starts[key], first)
    if found.missing:
        # One line for all: a transactional source's markers leave such offsets in every partition
        # it wrote to since the checkpoint, which at a thousand partitions would be a thousand lines.
        past = sum(b - a + 1 for key, (first, last) in found.missing.items()
                   for a, b in found.copied[key] if first <= a <= last)
        shown = shown_partitions(found.missing, lambda t, p, span: f"{t}[{p}] from {span[0]} (last copied {span[1]})")
        log(f"(re)start: {len(found.missing)} partition(s) hold offsets below their last copy that no run copied "
            "(a write failed while later ones went on, or records the query filters out: transaction markers, "
            f"cycles), read again: {shown}; the {past} records copied "
            "past them are not written twice")
    counted(len(found.missing))
    return found.marks, found.copied
