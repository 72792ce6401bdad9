"""One line per micro-batch of the replicate query (records in, copied, skipped, rate, lag), and
the progress of the flow's other queries for its health."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from pyspark.sql import SparkSession

from dr_stream.core.lag import Partition, spark_offsets
from dr_stream.replication.flow_metrics import FlowMetrics
from dr_stream.replication.record_counts import RecordCounts
from dr_stream.replication.trigger_width import BatchCost
from dr_stream.runtime.jvm_classes import gateway


@dataclass(frozen=True)
class BatchRead:
    """What one committed batch of the replicate query read: per source partition the offsets
    [start, end) (a partition new to the query has no start), and how many records Spark's source
    delivered from them; and the source's log ends the batch was planned with (`log_ends`, Spark's
    `latestOffset`: beyond `ends` when the batch was bounded)."""

    starts: dict[Partition, int]
    ends: dict[Partition, int]
    records: int
    log_ends: dict[Partition, int] = field(default_factory=dict)

    @classmethod
    def of(cls, source: Mapping[str, Any], records: int) -> BatchRead:
        return cls(spark_offsets(source.get("startOffset")), spark_offsets(source.get("endOffset")), records,
                   spark_offsets(source.get("latestOffset")))

    @property
    def may_have_gaps(self) -> bool:
        """Whether some offset of the batch may have delivered no record: a transaction marker, a
        record compacted away, or one deleted before it was read (Spark's source, told not to fail
        on data loss, reads on from the log start). Not when the batch delivered a record for every
        offset it spanned; a partition new to the query spans what cannot be told, so it may."""
        if any(k not in self.starts for k in self.ends):
            return True
        return sum(max(0, end - self.starts[k]) for k, end in self.ends.items()) > self.records

    def without(self, partitions: Mapping[Partition, int]) -> BatchRead:
        return BatchRead({k: o for k, o in self.starts.items() if k not in partitions},
                         {k: o for k, o in self.ends.items() if k not in partitions}, self.records, self.log_ends)


def durations(parts: dict[str, int] | None) -> str:
    """'1094 ms (addBatch 700, walCommit 120, ...)': where a batch's time went, largest first."""
    parts = dict(parts or {})
    total = parts.pop("triggerExecution", None)
    shown = ", ".join(f"{k} {v}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1])[:3] if v)
    return f"{total} ms ({shown})" if total is not None else shown


def partitions_read(sources: list[dict[str, Any]]) -> int:
    """Source partitions from which a batch read at least one record."""
    read = 0
    for s in sources:
        start = spark_offsets(s.get("startOffset"))
        read += sum(1 for key, end in spark_offsets(s.get("endOffset")).items() if end > start.get(key, end))
    return read


class Counted(Protocol):
    """What a query's rules counted since the last call, by reason (`record_counts`)."""

    def taken(self) -> dict[str, int]: ...

    def unconfirmed_taken(self) -> dict[tuple[str, int], int]: ...


def read_by_topic(sources: list[dict[str, Any]]) -> dict[str, int]:
    """Records a batch read per topic: its source's end offsets minus its start offsets."""
    out: dict[str, int] = {}
    for s in sources:
        start = spark_offsets(s.get("startOffset"))
        for (topic, partition), end in spark_offsets(s.get("endOffset")).items():
            out[topic] = out.get(topic, 0) + max(0, end - start.get((topic, partition), end))
    return out


class ProgressPrinter:
    """Logs a line per batch of one replicate query, keeps the flow's running totals and tells
    the flow's metrics what each batch skipped. The lag it shows is the lag sampler's, the
    same figure /metrics and `status` give. Fed by `listen` with each batch's progress as Spark
    writes it in JSON."""

    def __init__(self, flow_name: str, query_name: str, metrics: FlowMetrics,
                 log: Callable[[str], None] = print,
                 on_batch: Callable[[BatchRead], None] = lambda batch: None,
                 runs_published: bool = True, on_cost: Callable[[BatchCost], None] = lambda cost: None) -> None:
        self.flow_name, self.query_name, self.metrics, self.log = flow_name, query_name, metrics, log
        # Told what each committed batch read.
        self.on_batch = on_batch
        # Told what each batch cost (`trigger_width`).
        self.on_cost = on_cost
        # Without provenance no runs are published, so copies are counted from the batches here.
        self.runs_published = runs_published
        self.totals = {"batches": 0, "read": 0, "copied": 0, "skipped_cycle": 0, "malformed_provenance": 0,
                       "unconfirmed_cycle": 0}
        # The running query's (`new_counts`)
        self.counts: Counted | None = None
        self._ids: set[str] = set()

    def new_counts(self, spark: SparkSession) -> RecordCounts:
        """Counts for the query about to (re)start, which its batches' progress takes from."""
        self.counts = RecordCounts.register(spark, self.query_name)
        return self.counts

    def query_started(self, query_id: str, name: str | None) -> None:
        if name == self.query_name:
            self._ids.add(query_id)

    def batch_done(self, p: dict[str, Any]) -> None:
        """One batch's progress, as Spark's `StreamingQueryProgress.json` gives it."""
        if p.get("name") != self.query_name:
            return
        sources = p.get("sources") or []
        if sources:
            self.on_batch(BatchRead.of(sources[0], int(p.get("numInputRows") or 0)))
        # What the rules counted since the last batch: this batch's, unless the next one's tasks
        # have already ended too (a count then shows one batch early, never twice).
        counted = self.counts.taken() if self.counts else {}
        records = int(p.get("numInputRows") or 0)
        unchecked = counted.get("came_from_destination_unchecked", 0)
        skipped, malformed = counted.get("came_from_destination", 0) + unchecked, counted.get("malformed_provenance", 0)
        unconfirmed = counted.get("unconfirmed_cycle", 0)
        self.metrics.batch_done(self.query_name, counted, None if self.runs_published else read_by_topic(sources))
        unconfirmed_at = self.counts.unconfirmed_taken() if self.counts and unconfirmed else {}
        for (topic, _), claims in unconfirmed_at.items():
            self.metrics.provenance_unconfirmed(topic, claims)
        for key, value in (("batches", 1), ("read", records), ("copied", records - skipped),
                           ("skipped_cycle", skipped), ("malformed_provenance", malformed),
                           ("unconfirmed_cycle", unconfirmed)):
            self.totals[key] += value
        loops = self.metrics.loops_shown()
        rate = p.get("processedRowsPerSecond")  # Spark leaves out a rate it could not compute
        durations_ms = p.get("durationMs") or {}
        self.log(
            f"batch {p.get('batchId')}: {records} read, {records - skipped} copied, "
            f"{skipped} skipped (came from the destination), {malformed} malformed provenance, "
            + (f"{unconfirmed} copied though a header claims they came from the destination, " if unconfirmed else "")
            + (f"{unchecked} of the skipped taken on their header unchecked, " if unchecked else "")
            + f"{float(rate or 0):.0f} rec/s, {self.metrics.lag_shown()}, "
            f"{durations(durations_ms)}" + (f"; loops: {loops}" if loops else "")
        )
        for (topic, partition), claims in sorted(unconfirmed_at.items()):
            self.log(f"{topic}-{partition}: {claims} record{'s' if claims != 1 else ''} claiming to come back from "
                     "the destination copied: no run of a flow on the source holds them as that copy and the "
                     "destination holds no such original (forged or stale provenance headers)")
        if unchecked:
            self.log(f"{unchecked} records taken as come back on their provenance header alone: the runs on the "
                     "source or the original on the destination could not be read (see the executor log)")
        wall_ms = int(durations_ms.get("triggerExecution", 0))
        self.on_cost(BatchCost(wall_ms, records, partitions_read(sources)))

    def query_idle(self, query_id: str) -> None:
        if query_id in self._ids:  # the trigger found nothing new: progress, not a stall
            self.metrics.batch_done(self.query_name, {})
            self.on_cost(BatchCost(0, 0, 0))


class QueryProgress:
    """A query that says nothing per batch (the translate query says what it translated itself):
    its batches, and Spark's reports that a trigger found nothing new, count as its progress."""

    def __init__(self, query_name: str, metrics: FlowMetrics) -> None:
        self.query_name, self.metrics = query_name, metrics
        self.batches = 0
        self._ids: set[str] = set()

    def query_started(self, query_id: str, name: str | None) -> None:
        if name == self.query_name:
            self._ids.add(query_id)

    def batch_done(self, p: dict[str, Any]) -> None:
        if p.get("name") == self.query_name:
            self.batches += 1
            self.metrics.batch_done(self.query_name, {})

    def query_idle(self, query_id: str) -> None:
        if query_id in self._ids:
            self.metrics.batch_done(self.query_name, {})


class _SparkEvents:
    """Spark's streaming listener events, received from the JVM as they are (a Py4J callback
    object for Spark's `PythonStreamingQueryListener`) and handed to the printer as JSON.

    pyspark's own listener turns every progress event into Python objects with some thirty
    round trips to the JVM, several of them looking a class up by name through every jar on
    the classpath; at five batches a second that was 20% of the JVM's CPU in `make bench`'s
    micro-batch steady phase (`make profile`). Here an event costs the callback and two calls."""

    def __init__(self, printers: tuple[ProgressPrinter | QueryProgress, ...]) -> None:
        self.printers = printers

    def onQueryStarted(self, event: Any) -> None:
        query_id, name = event.id().toString(), event.name()
        for printer in self.printers:
            printer.query_started(query_id, name)

    def onQueryProgress(self, event: Any) -> None:
        progress = json.loads(event.progress().json())
        for printer in self.printers:
            printer.batch_done(progress)

    def onQueryIdle(self, event: Any) -> None:
        query_id = event.id().toString()
        for printer in self.printers:
            printer.query_idle(query_id)

    def onQueryTerminated(self, event: Any) -> None:
        pass

    class Java:
        implements: ClassVar[list[str]] = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def listen(spark: SparkSession, *printers: ProgressPrinter | QueryProgress) -> object:
    """Registers `printers` for the session's streaming events; returns what `unlisten` takes."""
    from pyspark.java_gateway import ensure_callback_server_started

    py4j = gateway(spark.sparkContext)
    ensure_callback_server_started(py4j)
    wrapper = py4j.jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper(_SparkEvents(printers))
    spark._jsparkSession.streams().addListener(wrapper)
    return wrapper


def unlisten(spark: SparkSession, registered: object) -> None:
    spark._jsparkSession.streams().removeListener(registered)
