"""One console line per micro-batch of the replicate query: records in, copied, skipped, rate, lag."""

from __future__ import annotations

import sys
from collections.abc import Callable

from pyspark.sql.streaming import StreamingQueryListener

from dr_stream.lag import behind_latest


def durations(parts: dict[str, int] | None) -> str:
    """'1094 ms (addBatch 700, walCommit 120, ...)': where a batch's time went, largest first."""
    parts = dict(parts or {})
    total = parts.pop("triggerExecution", None)
    shown = ", ".join(f"{k} {v}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1])[:3] if v)
    return f"{total} ms ({shown})" if total is not None else shown


class ProgressPrinter(StreamingQueryListener):
    """Prints a line per batch of one replicate query and keeps the flow's running totals."""

    def __init__(self, flow_name: str, query_name: str,
                 on_batch: Callable[[str | None], None] = lambda end_offsets: None) -> None:
        self.flow_name = flow_name
        self.query_name = query_name
        # Told each committed batch's source end offsets (the Kafka source's JSON).
        self.on_batch = on_batch
        self.totals = {"batches": 0, "read": 0, "copied": 0, "skipped_cycle": 0, "malformed_provenance": 0}

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        p = event.progress
        if p.name != self.query_name:
            return
        if p.sources:
            self.on_batch(p.sources[0].endOffset)
        metrics = p.observedMetrics.get("replicate")
        records = p.numInputRows
        skipped = int(metrics["skipped_cycle"] or 0) if metrics else 0
        malformed = int(metrics["malformed_provenance"] or 0) if metrics else 0
        lag = sum(behind_latest(s.latestOffset, s.endOffset) for s in p.sources)
        for key, value in (("batches", 1), ("read", records), ("copied", records - skipped),
                           ("skipped_cycle", skipped), ("malformed_provenance", malformed)):
            self.totals[key] += value
        line = (
            f"[{self.flow_name}] batch {p.batchId}: {records} read, {records - skipped} copied, "
            f"{skipped} skipped (came from the destination), {malformed} malformed provenance, "
            f"{p.processedRowsPerSecond:.0f} rec/s, lag {lag} records, {durations(p.durationMs)}"
        )
        print(line, file=sys.stdout, flush=True)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass
