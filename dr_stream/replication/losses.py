"""Losses: source records a flow can no longer copy, each recorded with its range and its cause.

A loss is never the flow's choice, so it is never silent: it goes to the flow's ledger (a Delta
table, `streaming.losses`), to one log line, to `dr_stream_records_lost_total` and to `dr-stream
losses`, and `drill` fails while a recent one is on record.

The causes (`CAUSES`):
- `retention`: the source deleted records (retention, or a delete-records request) before the
  flow read them: its log start passed the next offset the flow was to read;
- `topic-recreated`: the source topic was deleted and created again, so its offsets start over;
- `offsets-rewound`: the source's log end fell below what was already copied (an unclean
  leader election, a truncation);
- `refused`: the destination refused the record itself and an operator skipped it.

`retention_losses`, `unrecorded` and `outlived` are the rules (pure); `LossLedger` is the table.

What the ledger keeps follows what is live: an entry leaves once it is older than `KEPT_S` (and
than `drill.losses_since`) and the destination holds nothing it could still matter to (`outlived`),
so a flow that keeps falling behind its source's retention, recording a range at every batch,
keeps a month and a retention of them, not every range since its first day.

Invariant: a range is recorded once: a restart that finds the same gap again (nothing was read
since) records only what grew, never the same offsets twice; an entry younger than `KEPT_S` or
than the drill's window never leaves.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from dr_stream.runtime.delta_reads import DeltaReads
from dr_stream.runtime.delta_upkeep import RETENTION_S, rewriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


Partition = tuple[str, int]
CAUSES = ("retention", "topic-recreated", "offsets-rewound", "refused")
# `--losses-since` of `drill` when not given: a loss this recent is something an operator has
# to look at before failing over onto the destination that misses it.
RECENT_S = 7 * 24 * 3600.0
# The ledger is also the flow's record of what it lost, for the operator looking back: an entry
# stays at least a month, whatever the destination still holds.
KEPT_S = 30 * 24 * 3600.0


@dataclass(frozen=True)
class Loss:
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    records: int  # -1 when the source cannot tell (a recreated topic's old offsets)
    cause: str
    detected_at: dt.datetime
    # topic-recreated: the destination offset (same partition, remote topic) the new topic's copies
    # start at; the offset index takes no run of the old topic from below it (`RunStore.begin_life`).
    # offsets-rewound: the destination offset the copies of the records written again start at
    # (`RunStore.rewind`)
    destination_offset: int | None = None

    def line(self) -> str:
        count = "an unknown number of records" if self.records < 0 else f"{self.records} records"
        offsets = f"{self.first_offset}-{self.last_offset}" if self.last_offset >= 0 else f"from {self.first_offset}"
        return (f"{self.topic}[{self.partition}]: {count} lost ({self.cause}), offsets {offsets}, "
                f"detected {self.detected_at:%Y-%m-%dT%H:%M:%SZ}")

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "detected_at": self.detected_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}


def retention_losses(next_to_read: Mapping[Partition, int], log_starts: Mapping[Partition, int],
                     now: dt.datetime) -> list[Loss]:
    """A partition whose log starts past the next offset the flow was to read lost the records
    between them: `next .. start - 1`. Offsets are counted as records: a transaction marker among
    them is counted too (the source no longer says which offsets held one)."""
    return [Loss(topic, partition, nxt, log_starts[(topic, partition)] - 1,
                 log_starts[(topic, partition)] - nxt, "retention", now)
            for (topic, partition), nxt in sorted(next_to_read.items())
            if (topic, partition) in log_starts and log_starts[(topic, partition)] > nxt]


def skipped_losses(uncopied: Mapping[Partition, list[tuple[int, int]]], log_starts: Mapping[Partition, int],
                   now: dt.datetime, settle: bool = False) -> tuple[list[Loss], dict[Partition, list[tuple[int, int]]]]:
    """While the flow runs: the offsets its committed batches read past without a copy that are
    now below the partition's log start were deleted before they were read (Spark's source, told
    not to fail on data loss, reads on from the log start): `retention` from each range's first
    offset to the log start. Ranges still above it held records the flow filtered out, markers or
    compacted records, and are no loss. Adjacent ranges are one entry, and a range that ends below
    the log start is returned as still under way (batches capped in size cross a long deletion
    in several), to be joined with what the next batches read, unless `settle`."""
    losses: list[Loss] = []
    under_way: dict[Partition, list[tuple[int, int]]] = {}
    for (topic, partition), ranges in sorted(uncopied.items()):
        start = log_starts.get((topic, partition))
        if start is None:
            continue
        for first, end in _joined(ranges):
            if end < start and not settle:
                under_way.setdefault((topic, partition), []).append((first, end))
            elif (last := min(end, start) - 1) >= first:
                losses.append(Loss(topic, partition, first, last, last - first + 1, "retention", now))
    return losses, under_way


def _joined(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for first, end in sorted(ranges):
        if out and first <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((first, end))
    return out


def unrecorded(found: Iterable[Loss], recorded: list[Loss]) -> list[Loss]:
    """`found`, less the offsets the ledger already holds for the same partition and cause: a
    restart before the flow read past a gap finds it again, maybe grown (retention went on)."""
    through: dict[tuple[str, int, str], list[tuple[int, int]]] = {}
    for loss in recorded:
        through.setdefault((loss.topic, loss.partition, loss.cause), []).append((loss.first_offset, loss.last_offset))
    out = []
    for loss in found:
        # no range to subtract (a recreated topic), or an event the same offsets can see again (a
        # rewind): the same entry is not made twice
        if loss.last_offset < 0 or loss.cause == "offsets-rewound":
            if not any(_same_event(loss, x) for x in recorded):
                out.append(loss)
            continue
        first = loss.first_offset
        for start, end in sorted(through.get((loss.topic, loss.partition, loss.cause), [])):
            if start <= first <= end:
                first = end + 1
        if first > loss.last_offset:
            continue
        records = loss.records if loss.records < 0 else loss.last_offset - first + 1
        out.append(replace(loss, first_offset=first, records=records))
    return out


def life_starts_of(losses: Iterable[Loss], remote_topic: Callable[[str], str]) -> dict[Partition, int]:
    """(destination topic, partition) -> where the newest recreation of its source topic began
    on it: the runs below are of a topic that is gone."""
    out: dict[Partition, int] = {}
    for loss in losses:
        if loss.cause == "topic-recreated" and loss.destination_offset is not None:
            dest = (remote_topic(loss.topic), loss.partition)
            out[dest] = max(out.get(dest, 0), loss.destination_offset)
    return out


def rewinds_of(losses: Iterable[Loss], remote_topic: Callable[[str], str]) -> dict[Partition, list[tuple[int, int]]]:
    """(destination topic, partition) -> (origin offset, destination offset) of each rewind of its
    source partition: the runs below that destination offset keep no record from that origin
    offset on (`RunStore.rewind`)."""
    out: dict[Partition, list[tuple[int, int]]] = {}
    for loss in losses:
        if loss.cause == "offsets-rewound" and loss.destination_offset is not None:
            out.setdefault((remote_topic(loss.topic), loss.partition), []).append(
                (loss.first_offset, loss.destination_offset))
    return out


def outlived(losses: Iterable[Loss], now: dt.datetime, held_from: Mapping[Partition, int],
             dest_starts: Mapping[Partition, int], dest_topics: set[str], remote_topic: Callable[[str], str],
             kept_s: float = KEPT_S) -> list[Loss]:
    """The entries no reader needs any more, among those older than `kept_s`: those of a topic
    the destination no longer has; a range of records lost (`retention`, `refused`) once the
    oldest copy the destination holds of its source partition (`held_from`, by origin offset)
    comes after it, so no consumer there can read across it; a recreation or a rewind once the
    destination's log start (`dest_starts`) has passed the offset it marks, so no run it fences
    off is left. A partition the flow knows nothing of keeps its entries."""
    out = []
    for loss in losses:
        if (now - loss.detected_at).total_seconds() < kept_s:
            continue
        dest = (remote_topic(loss.topic), loss.partition)
        if dest[0] not in dest_topics:
            out.append(loss)
        elif loss.cause in ("retention", "refused"):
            oldest = held_from.get((loss.topic, loss.partition))
            if oldest is not None and oldest > loss.last_offset:
                out.append(loss)
        elif loss.destination_offset is not None:
            start = dest_starts.get(dest)
            if start is not None and start > loss.destination_offset:
                out.append(loss)
    return out


def dropped_sql(dropped: Iterable[Loss], table: str = "t") -> str:
    """The ledger less `dropped`, each entry found by what makes it one (`unrecorded` records a
    range once): SQL both delta-rs and Spark run, with no time in it."""
    def literal(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    def offset(value: int | None) -> str:
        return "destination_offset IS NULL" if value is None else f"destination_offset = {value}"

    matches = [f'(topic = {literal(x.topic)} AND "partition" = {x.partition} AND cause = {literal(x.cause)} AND '
               f"first_offset = {x.first_offset} AND last_offset = {x.last_offset} AND {offset(x.destination_offset)})"
               for x in dropped]
    return f"SELECT * FROM {table}" + (f" WHERE NOT ({' OR '.join(matches)})" if matches else "")


def _same_event(a: Loss, b: Loss) -> bool:
    return (a.topic, a.partition, a.cause, a.first_offset, a.destination_offset) == (
        b.topic, b.partition, b.cause, b.first_offset, b.destination_offset)


_COLUMNS = "topic, partition, first_offset, last_offset, records, cause, detected_at, destination_offset"
SCHEMA = ("topic STRING, partition INT, first_offset LONG, last_offset LONG, records LONG, cause STRING, "
          "detected_at TIMESTAMP, destination_offset LONG")


class LossLedger:
    """The flow's losses as a Delta table at `path`: appended by the running flow through Spark,
    read by the commands without a JVM (`DeltaReads`), kept to what is live by `keep`."""

    def __init__(self, path: str, reads: DeltaReads | None = None, latest: bool = False,
                 retention_s: float = RETENTION_S) -> None:
        self.path = path
        self.reads = reads or DeltaReads()
        # a running flow appends to its ledger and reads it again: each read sees the newest version
        self.latest = latest
        self._rewrite = rewriter(self.reads.spark, retention_s)

    def keep(self, now: dt.datetime, held_from: Mapping[Partition, int], dest_starts: Mapping[Partition, int],
             dest_topics: set[str], remote_topic: Callable[[str], str], kept_s: float = KEPT_S) -> list[Loss]:
        """Drops the entries no reader needs any more (`outlived`); returns them. An entry
        appended meanwhile (a `skip` from another process) is kept: the rewrite removes only the
        files of the version it read."""
        dropped = outlived(self.read(), now, held_from, dest_starts, dest_topics, remote_topic, kept_s)
        if dropped:
            self._rewrite(self.path, dropped_sql(dropped), [c.strip() for c in _COLUMNS.split(",")])
        return dropped

    def read(self, since: dt.datetime | None = None) -> list[Loss]:
        """The losses recorded (at or after `since`, zone-aware), oldest first. A ledger holds a
        handful of rows, so the window is applied here, the same through either reader."""
        rows = self.reads.query(self.path, f"SELECT {_COLUMNS} FROM t ORDER BY detected_at, topic, partition",
                                self.latest)
        found = [Loss(r["topic"], int(r["partition"]), int(r["first_offset"]), int(r["last_offset"]),
                      int(r["records"]), r["cause"], utc(r["detected_at"]),
                      None if r["destination_offset"] is None else int(r["destination_offset"])) for r in rows]
        return [x for x in found if since is None or x.detected_at >= since]

    def life_starts(self, remote_topic: Callable[[str], str]) -> dict[Partition, int]:
        """Per destination partition, the offset the copies of its source topic's current life
        start at (`life_starts_of`)."""
        return life_starts_of(self.read(), remote_topic)

    def rewinds(self, remote_topic: Callable[[str], str]) -> dict[Partition, list[tuple[int, int]]]:
        """Per destination partition, its source partition's rewinds (`rewinds_of`)."""
        return rewinds_of(self.read(), remote_topic)

    def append(self, spark: SparkSession, losses: list[Loss]) -> None:
        if not losses:
            return
        rows = [(x.topic, x.partition, x.first_offset, x.last_offset, x.records, x.cause,
                 x.detected_at, x.destination_offset) for x in losses]
        # detected_at is zone-aware (UTC): Spark stores the instant, whatever the session's zone.
        spark.createDataFrame(rows, SCHEMA).write.format("delta").mode("append").save(self.path)


def utc(value: dt.datetime) -> dt.datetime:
    """A time read from a Delta table as the zone-aware UTC instant (either reader may drop the zone)."""
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def record_found(ledger: LossLedger, spark: SparkSession, found: list[Loss], log: Callable[[str], None],
                 counted: Callable[[Loss], None]) -> list[Loss]:
    """Appends what of `found` the ledger does not hold yet, says each in one line and counts it;
    returns what it recorded."""
    new = unrecorded(found, ledger.read() if found else [])
    ledger.append(spark, new)
    for loss in new:
        log(f"LOSS: {loss.line()}; recorded in {ledger.path} (see `dr-stream losses`)")
        counted(loss)
    return new
