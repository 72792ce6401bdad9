"""One line per micro-batch of the replicate query: records in, copied, skipped, rate, lag."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql.streaming import StreamingQueryListener

from dr_stream.lag import spark_offsets
from dr_stream.replication.flow_metrics import FlowMetrics
from dr_stream.replication.trigger_width import BatchCost


def durations(parts: dict[str, int] | None) -> str:
    """'1094 ms (addBatch 700, walCommit 120, ...)': where a batch's time went, largest first."""
    parts = dict(parts or {})
    total = parts.pop("triggerExecution", None)
    shown = ", ".join(f"{k} {v}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1])[:3] if v)
    return f"{total} ms ({shown})" if total is not None else shown


def partitions_read(sources) -> int:
    """Source partitions from which a batch read at least one record."""
    read = 0
    for s in sources:
        start = spark_offsets(s.startOffset)
        read += sum(1 for key, end in spark_offsets(s.endOffset).items() if end > start.get(key, end))
    return read


def _count(row, name: str) -> int:
    return int(row[name] or 0) if row is not None and name in row else 0


def read_by_topic(sources) -> dict[str, int]:
    """Records a batch read per topic: its source's end offsets minus its start offsets."""
    out: dict[str, int] = {}
    for s in sources:
        start = spark_offsets(s.startOffset)
        for (topic, partition), end in spark_offsets(s.endOffset).items():
            out[topic] = out.get(topic, 0) + max(0, end - start.get((topic, partition), end))
    return out


class ProgressPrinter(StreamingQueryListener):
    """Logs a line per batch of one replicate query, keeps the flow's running totals and tells
    the flow's metrics what each batch skipped. The lag it shows is the lag sampler's, the
    same figure /metrics and `status` give."""

    def __init__(self, flow_name: str, query_name: str, metrics: FlowMetrics,
                 log: Callable[[str], None] = print,
                 on_batch: Callable[[str | None], None] = lambda end_offsets: None,
                 runs_published: bool = True, on_cost: Callable[[BatchCost], None] = lambda cost: None) -> None:
        self.flow_name, self.query_name, self.metrics, self.log = flow_name, query_name, metrics, log
        # Told each committed batch's source end offsets (the Kafka source's JSON).
        self.on_batch = on_batch
        # Told what each batch cost (`trigger_width`).
        self.on_cost = on_cost
        # Without provenance no runs are published, so copies are counted from the batches here.
        self.runs_published = runs_published
        self.totals = {"batches": 0, "read": 0, "copied": 0, "skipped_cycle": 0, "malformed_provenance": 0}
        self._ids: set[str] = set()

    def onQueryStarted(self, event) -> None:
        if event.name == self.query_name:
            self._ids.add(str(event.id))

    def onQueryProgress(self, event) -> None:
        p = event.progress
        if p.name != self.query_name:
            return
        if p.sources:
            self.on_batch(p.sources[0].endOffset)
        replicate, resume = p.observedMetrics.get("replicate"), p.observedMetrics.get("resume")
        records = p.numInputRows
        skipped, malformed = _count(replicate, "skipped_cycle"), _count(replicate, "malformed_provenance")
        self.metrics.batch_done(self.query_name, {
            "came_from_destination": skipped, "malformed_provenance": malformed,
            "already_copied": _count(resume, "already_copied"), "left_out": _count(resume, "left_out"),
        }, None if self.runs_published else read_by_topic(p.sources))
        for key, value in (("batches", 1), ("read", records), ("copied", records - skipped),
                           ("skipped_cycle", skipped), ("malformed_provenance", malformed)):
            self.totals[key] += value
        loops = self.metrics.loops_shown()
        self.log(
            f"batch {p.batchId}: {records} read, {records - skipped} copied, "
            f"{skipped} skipped (came from the destination), {malformed} malformed provenance, "
            f"{p.processedRowsPerSecond:.0f} rec/s, {self.metrics.lag_shown()}, "
            f"{durations(p.durationMs)}" + (f"; loops: {loops}" if loops else "")
        )
        wall_ms = int((p.durationMs or {}).get("triggerExecution", 0))
        self.on_cost(BatchCost(wall_ms, records, partitions_read(p.sources)))

    def onQueryIdle(self, event) -> None:
        if str(event.id) in self._ids:  # the trigger found nothing new: progress, not a stall
            self.metrics.batch_done(self.query_name, {})
            self.on_cost(BatchCost(0, 0, 0))

    def onQueryTerminated(self, event) -> None:
        pass
