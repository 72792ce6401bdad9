"""Partitions held by a record the destination refused: the flow stops there, not everywhere.

A record the destination refuses for the record itself (too large for the topic, invalid there,
a timestamp out of its bounds, a policy, no right to write its topic) can never be copied as it
is, so retrying the batch would fail forever and stop every partition of the flow. Instead:

- the sink's producer attaches the refused record's origin to the error its task fails with
  (`io.drstream.kafka.Refusals`); `refusal_in` reads it from the query's error;
- the flow records a `held` event (topic, partition, offset, the record's size, the broker's
  reason) in its holds table (Delta, beside the ledger of losses), says it in one line, and
  restarts the replicate query at once with that partition's records from the refused one on
  filtered out (`Resume.held`): every other partition goes on copying;
- `dr-stream skip` records the refused record as a `refused` loss in the ledger. The running
  flow sees it within seconds (or at its next start), and starts its query on a new checkpoint
  that reads that partition from the record after the refused one and every other partition
  from where it was; once a batch of it is committed, a `resumed` event closes the hold.

`holds_now` is the rule (pure): a partition's newest event says whether it is held; a held
record with a `refused` loss on record is skipped and waits for its resumption. So the table
keeps each partition's newest event and the events of the last month (`outlived_events`): what
it holds follows the partitions ever refused, not the refusals ever made.

Invariant: a held partition copies nothing past the refused record until an operator skips it,
and a skip re-reads everything after it that the hold filtered out, so no record is lost or
copied twice across hold, skip and restart (the resume marks drop what was already written).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dr_stream.core.config import ClusterConfig, FlowConfig, sibling
from dr_stream.replication.losses import KEPT_S, Loss, LossLedger, utc
from dr_stream.runtime.delta_reads import DeltaReads
from dr_stream.runtime.delta_upkeep import RETENTION_S, rewriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Partition = tuple[str, int]
MARK = "dr-stream refused record "
HELD, RETRY, RESUMED = "held", "retry", "resumed"


@dataclass(frozen=True)
class Refusal:
    """What the sink's producer said about a refused record: its origin and the broker's reason."""

    topic: str
    partition: int
    offset: int
    dest_topic: str
    dest_partition: int
    error: str


def refusal_in(error_text: str) -> Refusal | None:
    """The first refused record named in a query's error text, or None when it names none."""
    start = error_text.find(MARK)
    if start < 0:
        return None
    try:
        v, _ = json.JSONDecoder().raw_decode(error_text, start + len(MARK))
        return Refusal(str(v["topic"]), int(v["partition"]), int(v["offset"]), str(v["dest_topic"]),
                       int(v["dest_partition"]), str(v["error"]))
    except (ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class Hold:
    """One event of a partition's hold: `held` at the refused record, `retry` when an operator asks
    for it again (the destination was changed to take it), `resumed` once the partition goes on."""

    topic: str
    partition: int
    offset: int
    size: int  # the refused record's key, value and headers in bytes; -1 when it could not be read
    reason: str
    at: dt.datetime
    event: str = HELD

    @property
    def key(self) -> Partition:
        return (self.topic, self.partition)

    def line(self) -> str:
        size = "size unknown" if self.size < 0 else f"{self.size} bytes"
        return f"{self.topic}[{self.partition}] held at offset {self.offset} ({size}): {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset, "size": self.size,
                "reason": self.reason, "held_at": self.at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}


@dataclass(frozen=True)
class Holding:
    """A flow's holds now: partitions held at a record, and those an operator released (skipped
    or retried) that wait for the query to go on from their new start."""

    held: dict[Partition, Hold]
    skipped: dict[Partition, Hold]
    retried: dict[Partition, Hold]

    def held_from(self) -> dict[Partition, int]:
        """Per held partition, the first offset its query must not copy."""
        return {k: h.offset for k, h in self.held.items()}

    def resume_at(self) -> dict[Partition, int]:
        """Per released partition, the offset its new checkpoint reads first: past a skipped
        record, at a retried one."""
        return {**{k: h.offset + 1 for k, h in self.skipped.items()}, **{k: h.offset for k, h in self.retried.items()}}

    def released(self) -> dict[Partition, Hold]:
        return {**self.skipped, **self.retried}


def holds_now(events: Iterable[Hold], losses: Iterable[Loss]) -> Holding:
    """Each partition's newest event (oldest first in `events`) decides: `held` is a hold, unless
    a `refused` loss at its offset says an operator skipped it; `retry` waits to be read again;
    `resumed` is none."""
    newest: dict[Partition, Hold] = {}
    for event in events:
        newest[event.key] = event
    skips = {(x.topic, x.partition, x.first_offset) for x in losses if x.cause == "refused"}
    held = {k: h for k, h in newest.items() if h.event == HELD and (*k, h.offset) not in skips}
    skipped = {k: h for k, h in newest.items() if h.event == HELD and (*k, h.offset) in skips}
    return Holding(held, skipped, {k: h for k, h in newest.items() if h.event == RETRY})


def outlived_events(events: Iterable[Hold], now: dt.datetime, kept_s: float = KEPT_S) -> list[Hold]:
    """The events no reader needs: older than `kept_s` and not their partition's newest (which
    alone says whether it is held), nor alike to it (the table finds an event by its partition,
    offset and kind)."""
    events = list(events)
    newest: dict[Partition, Hold] = {}
    for event in events:
        newest[event.key] = event
    alike = {(*h.key, h.offset, h.event) for h in newest.values()}
    return [h for h in events if (now - h.at).total_seconds() >= kept_s and (*h.key, h.offset, h.event) not in alike]


def dropped_events_sql(dropped: Iterable[Hold], table: str = "t") -> str:
    """The table less `dropped`, each event found by its partition, offset and kind."""
    def literal(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    matches = sorted({f'(topic = {literal(h.topic)} AND "partition" = {h.partition} AND record_offset = {h.offset} '
                      f"AND event = {literal(h.event)})" for h in dropped})
    return f"SELECT * FROM {table}" + (f" WHERE NOT ({' OR '.join(matches)})" if matches else "")


def refused_loss(hold: Hold, now: dt.datetime) -> Loss:
    """The ledger's entry for a held record an operator skipped."""
    return Loss(hold.topic, hold.partition, hold.offset, hold.offset, 1, "refused", now)


def holds_beside(losses_path: str) -> str:
    """The holds table lives beside the flow's ledger of losses."""
    return sibling(losses_path, "holds")


_COLUMNS = "topic, partition, record_offset, record_size, reason, event_at, event"
SCHEMA = ("topic STRING, partition INT, record_offset LONG, record_size LONG, reason STRING, event_at TIMESTAMP, "
          "event STRING")


class HoldTable:
    """A flow's hold events as a Delta table: appended by the running flow through Spark, read by
    the commands without a JVM (`DeltaReads`)."""

    def __init__(self, path: str, reads: DeltaReads | None = None, latest: bool = False,
                 retention_s: float = RETENTION_S) -> None:
        self.path = path
        self.reads = reads or DeltaReads()
        self.latest = latest
        self._rewrite = rewriter(self.reads.spark, retention_s)

    def keep(self, now: dt.datetime, kept_s: float = KEPT_S) -> list[Hold]:
        """Drops the events no reader needs (`outlived_events`); returns them."""
        dropped = outlived_events(self.read(), now, kept_s)
        if dropped:
            self._rewrite(self.path, dropped_events_sql(dropped), [c.strip() for c in _COLUMNS.split(",")])
        return dropped

    def read(self) -> list[Hold]:
        rows = self.reads.query(self.path, f"SELECT {_COLUMNS} FROM t ORDER BY event_at", self.latest)
        return [Hold(r["topic"], int(r["partition"]), int(r["record_offset"]), int(r["record_size"]), r["reason"],
                     utc(r["event_at"]), r["event"]) for r in rows]

    def holding(self, ledger: LossLedger) -> Holding:
        return holds_now(self.read(), ledger.read())

    def append(self, spark: SparkSession, events: list[Hold]) -> None:
        if events:
            rows = [(h.topic, h.partition, h.offset, h.size, h.reason, h.at, h.event) for h in events]
            spark.createDataFrame(rows, SCHEMA).write.format("delta").mode("append").save(self.path)


def record_size(cluster: ClusterConfig, topic: str, partition: int, offset: int) -> int:
    """The source record's key, value and headers in bytes; -1 when it cannot be read now."""
    from dr_stream.kafka.record_reads import read_records

    found = read_records(cluster, {(topic, partition): offset}).get((topic, partition))
    return -1 if found is None else found.size


class PartitionHolds:
    """The running flow's holds: taken from the replicate query's failures, applied at its starts."""

    def __init__(self, spark_of: Callable[[], SparkSession], config: FlowConfig, ledger: LossLedger,
                 log: Callable[[str], None], on_change: Callable[[int], None] = lambda held: None) -> None:
        self.spark_of, self.config, self.ledger, self.log, self.on_change = spark_of, config, ledger, log, on_change
        self.table = HoldTable(holds_beside(ledger.path), ledger.reads, latest=True,
                               retention_s=config.streaming.old_versions_retention_s)
        self.holding = Holding({}, {}, {})
        self._resuming: list[Hold] = []
        # per released partition, the origin offset its committed batches must pass to have read
        # again everything the hold filtered out
        self._until: dict[Partition, int] = {}

    def refresh(self) -> Holding:
        self.holding = self.table.holding(self.ledger)
        self.on_change(len(self.holding.held))
        return self.holding

    def hold(self, error_text: str) -> Hold | None:
        """Holds the partition of the record a failed query's error names as refused; the hold, or
        None when the error names none (or one already held: the filter did not take)."""
        refusal = refusal_in(error_text)
        if refusal is None:
            return None
        try:
            return self._hold(refusal)
        except Exception as exc:  # the query is retried as after any failure, and the hold tried again
            self.log(f"{refusal.topic}[{refusal.partition}]: the destination refused the record at offset "
                     f"{refusal.offset} ({refusal.error}), and the hold could not be recorded ({exc})")
            return None

    def _hold(self, refusal: Refusal) -> Hold | None:
        current = self.refresh().held.get((refusal.topic, refusal.partition))
        if current is not None and current.offset <= refusal.offset:
            return None
        hold = Hold(refusal.topic, refusal.partition, refusal.offset,
                    record_size(self.config.source, refusal.topic, refusal.partition, refusal.offset),
                    refusal.error, dt.datetime.now(dt.UTC))
        self.table.append(self.spark_of(), [hold])
        self.refresh()
        where = f"--config {self.config.path} --topic {hold.topic} --partition {hold.partition} --offset {hold.offset}"
        self.log(f"HELD: {hold.line()}. Every other partition goes on; {self.config.destination.alias} refuses the "
                 f"record as it is: change it to take the record and run `dr-stream retry {where}`, or run "
                 f"`dr-stream skip {where}` to go on without it (recorded as lost)")
        return hold

    def at_start(self) -> Holding:
        """The holds a query about to start applies; skipped ones resume once it commits a batch."""
        holding = self.refresh()
        # until `reread` knows the ranges, a released partition is not resumed by any batch
        self._resuming = list(holding.released().values())
        self._until = {h.key: 2**62 for h in self._resuming}
        for hold in holding.skipped.values():
            self.log(f"{hold.topic}[{hold.partition}]: the record at offset {hold.offset} was skipped "
                     f"(a refused loss); the partition goes on from offset {hold.offset + 1}")
        for hold in holding.retried.values():
            self.log(f"{hold.topic}[{hold.partition}]: the record at offset {hold.offset} is tried again")
        return holding

    def reread(self, marks: dict[Partition, int], holding: Holding,
               copied_from: Callable[[Partition, int], list[tuple[int, int]]] | None,
               ) -> tuple[dict[Partition, int], dict[Partition, list[tuple[int, int]]], dict[Partition, int]]:
        """The resume marks, the copied ranges and the start of each held or released partition
        for a query about to start. A hold takes effect only once the refused record's task
        failed, and the producer fails every record of the refused one's batch while it goes on
        with the batches behind it: the records just before the refused one may be missing from
        the destination (`hole_below`), and records after it may be there already. So such a
        partition is read from its first record not on the destination (a released one from no
        later than its new start), with its mark just below it and the ranges the offset index
        says were copied past it skipped, a skipped record among them: nothing is copied twice or
        left out (records copied early stand before the ones between on the destination). Until
        its batches pass those ranges, every start reads a released partition so again."""
        refused = {**holding.held_from(), **{k: h.offset for k, h in holding.released().items()}}
        resume_at = holding.resume_at()
        marks = dict(marks)
        copied: dict[Partition, list[tuple[int, int]]] = {}
        starts: dict[Partition, int] = {}
        if copied_from is None:
            # No offset index, so nothing says what is on the destination: the partition is read
            # again from its checkpoint's position, at least once, as after any restart of such a flow.
            starts = {key: resume_at.get(key, offset) for key, offset in refused.items()}
            self._until = {k: starts[k] - 1 for k in resume_at}
            return marks, copied, starts
        for key, offset in sorted(refused.items()):
            known = copied_from(key, 0)
            first = min(hole_below(offset, known), resume_at.get(key, offset))
            starts[key] = first
            marks[key] = min(marks.get(key, first - 1), first - 1)
            ranges = [(max(a, first), b) for a, b in known if b >= first]
            if resume_at.get(key, offset) > offset >= first:  # a skipped record stays skipped
                ranges = sorted([*ranges, (offset, offset)])
            if ranges:
                copied[key] = ranges
            self._said_reread(key, offset, first, [(a, b) for a, b in ranges if a > offset])
        self._until = {k: max([starts[k] - 1, *(b for _, b in copied.get(k, []))]) for k in resume_at}
        return marks, copied, starts

    def _said_reread(self, key: Partition, refused: int, first: int, past: list[tuple[int, int]]) -> None:
        topic, partition = key
        if first < refused:
            self.log(f"{topic}[{partition}]: records {first}-{refused - 1}, before the held one, failed with it (the "
                     "producer fails its whole batch) and are copied now")
        if past:
            self.log(f"{topic}[{partition}]: {sum(b - a + 1 for a, b in past)} records past the held one were "
                     f"copied before the hold took effect ({', '.join(f'{a}-{b}' for a, b in past)}); they are "
                     "not copied again, and stand before the records between them on the destination")

    def batch_committed(self, end_offsets: Mapping[Partition, int]) -> None:
        """A batch of the query committed (said from Spark's listener, so nothing is written here)."""
        for key, until in list(self._until.items()):
            if end_offsets.get(key, -1) > until:
                del self._until[key]

    def changed(self) -> str | None:
        """Records the skipped partitions a committed batch resumed; says why the running query must
        restart, if an operator skipped a record held now."""
        if self._resuming and not self._until:
            resuming, self._resuming = self._resuming, []
            now = dt.datetime.now(dt.UTC)
            self.table.append(self.spark_of(), [Hold(h.topic, h.partition, h.offset, h.size, h.reason, now, RESUMED)
                                                 for h in resuming])
        if not self.holding.held:
            return None
        resumed = {h.key for h in self._resuming}
        released = [k for k in self.refresh().released() if k not in resumed]
        return f"held records released: {', '.join(f'{t}[{p}]' for t, p in sorted(released))}" if released else None


def hole_below(refused: int, copied: list[tuple[int, int]]) -> int:
    """The first of the records just before a refused one that are not on the destination: one
    past the highest copied offset below it (the refused record itself when the one before it was
    copied, 0 when nothing below it is known copied)."""
    below = [min(b, refused - 1) for a, b in copied if a < refused]
    return max(below) + 1 if below else 0


def clamped(end_offsets: Mapping[Partition, int], held: Mapping[Partition, int]) -> dict[Partition, int]:
    """A batch's end offsets as handled: a held partition only up to its refused record."""
    return {key: min(offset, held[key]) if key in held else offset for key, offset in end_offsets.items()}
