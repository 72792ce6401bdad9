"""A flow's watch for records its source deleted before the flow read them.

Spark's Kafka source, told not to fail on data loss (a flow must not stop for good because a
partition aged out), only logs a warning and reads on from the log start. The watch runs where
the flow (re)starts its replicate query: it compares the next offset the checkpoint says the
query will read of each partition with the partition's log start, and records each gap in the
flow's ledger (`losses`) before Spark reads past it.

Invariant: the watch never holds the query back: a check that fails (a cluster away, a
checkpoint it cannot read) is said in one line and the query starts all the same.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from dr_stream.kafka.admin import log_bounds
from dr_stream.replication.checkpoint_positions import next_to_read
from dr_stream.replication.flow_metrics import FlowMetrics
from dr_stream.replication.losses import Loss, LossLedger, record_found, retention_losses

Partition = tuple[str, int]


def handled_through(read: dict[Partition, int], marks: dict[Partition, int],
                    replicated: dict[str, int]) -> dict[Partition, int]:
    """Per partition of `replicated`, the first offset not handled yet: the next the checkpoint
    reads, or past the resume mark when that is further on. The checkpoint can be behind what was
    copied (its progress is written after the batch), and a record copied before a stop was not
    lost to a retention that deleted it after."""
    out = {k: o for k, o in read.items() if k[0] in replicated}
    for key, mark in marks.items():
        if key[0] in replicated:
            out[key] = max(out.get(key, 0), mark + 1)
    return out


class LossWatch:
    def __init__(self, spark: SparkSession, ledger: LossLedger, checkpoint: str, starting_offsets: str,
                 source_admin: AdminClient, metrics: FlowMetrics, log: Callable[[str], None]) -> None:
        self.spark, self.ledger, self.checkpoint, self.starting_offsets = spark, ledger, checkpoint, starting_offsets
        self.source_admin, self.metrics, self.log = source_admin, metrics, log

    def at_start(self, replicated: dict[str, int], marks: dict[Partition, int]) -> list[Loss]:
        """Records what retention deleted of `replicated` (topic -> partitions) before the query,
        about to start from its checkpoint, read it; returns what it recorded. `marks` are the
        resume marks: records at or below them are on the destination (or were left out)."""
        try:
            read = next_to_read(self.spark, self.checkpoint)
            if not read and self.starting_offsets == "latest":
                return []  # a new query starts at the end: what it passes over is skipped by choice
            positions = handled_through(read, marks, replicated)
            if not positions:
                return []
            starts = {k: start for k, (start, _) in log_bounds(self.source_admin, sorted(positions)).items()}
            found = retention_losses(positions, starts, dt.datetime.now(dt.UTC))
            return record_found(self.ledger, self.spark, found, self.log,
                                lambda loss: self.metrics.records_lost(loss.topic, loss.cause, loss.records))
        except Exception as exc:  # never a reason not to copy; said, and checked again at the next start
            self.log(f"losses: could not compare the checkpoint's positions with the source's log starts ({exc})")
            return []
