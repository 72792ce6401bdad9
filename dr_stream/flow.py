"""One replication flow: the streaming query that copies source topics to the destination.

The record path is Spark's Kafka source -> `replicate.prepare` (Column expressions) ->
`foreachBatch` -> Spark's Kafka sink. The batch function does the driver-side work that
must happen before a write: create or grow destination topics, and on the first batch
after a (re)start, skip what a killed run already wrote (`already_copied`).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from dr_stream.already_copied import CopiedScanner, drop_already_copied
from dr_stream.config import FlowConfig
from dr_stream.policy import TopicFilter, TopicRenamer
from dr_stream.progress import ProgressPrinter
from dr_stream.replicate import TIMESTAMP_INTERCEPTOR, ReplicationPlan, prepare, to_sink_rows
from dr_stream.topics import TopicSync, admin_client, cluster_id


def _log_to(name: str) -> Callable[[str], None]:
    def log(message: str) -> None:
        print(f"[{name}] {message}", flush=True)

    return log


def source_options(config: FlowConfig) -> dict[str, str]:
    topic_filter = TopicFilter(config.topics.include, config.topics.exclude)
    options = {
        "subscribePattern": topic_filter.subscribe_pattern(),
        "includeHeaders": "true",
        "startingOffsets": config.streaming.starting_offsets,
        "maxOffsetsPerTrigger": str(config.streaming.max_records_per_batch),
        # Records deleted by retention before they were copied are reported by Spark and skipped;
        # stopping the flow would lose more (DESIGN: nothing silent, never a crash loop).
        "failOnDataLoss": "false",
        # New topics matching the pattern show up at the next metadata refresh.
        "kafka.metadata.max.age.ms": "5000",
        "kafka.isolation.level": "read_committed",
    }
    options["kafka.bootstrap.servers"] = config.source.bootstrap_servers
    options.update({f"kafka.{k}": v for k, v in config.source.kafka.items()})
    return options


def sink_options(config: FlowConfig) -> dict[str, str]:
    options = {
        # Ordering per partition, with retries, is what makes the crash-replay filter exact.
        "kafka.acks": "all",
        "kafka.enable.idempotence": "true",
        "kafka.max.in.flight.requests.per.connection": "5",
        "kafka.linger.ms": "5",
        "kafka.batch.size": "262144",
    }
    options["kafka.bootstrap.servers"] = config.destination.bootstrap_servers
    options.update({f"kafka.{k}": v for k, v in config.destination.kafka.items()})
    interceptors = options.get("kafka.interceptor.classes", "")
    options["kafka.interceptor.classes"] = ",".join(c for c in (interceptors, TIMESTAMP_INTERCEPTOR) if c)
    return options


@dataclass
class ReplicationFlow:
    config: FlowConfig
    spark: SparkSession
    log: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        self.log = self.log or _log_to(self.config.name)
        self.progress = ProgressPrinter(self.config.name)
        self._source_admin = admin_client(self.config.source.client_properties())
        self._dest_admin = admin_client(self.config.destination.client_properties())
        self.source_cluster_id = cluster_id(self._source_admin)
        self.destination_cluster_id = cluster_id(self._dest_admin)
        if self.source_cluster_id == self.destination_cluster_id:
            raise ValueError(f"{self.config.path}: source and destination are the same cluster "
                             f"({self.source_cluster_id})")
        topics = self.config.topics
        self.renamer = TopicRenamer(topics.rename)
        self.topic_sync = TopicSync(
            self._source_admin, self._dest_admin, TopicFilter(topics.include, topics.exclude),
            self.renamer, sync_configs=topics.sync_configs, log=self.log,
        )
        self.plan = ReplicationPlan(
            source_cluster_id=self.source_cluster_id,
            destination_cluster_id=self.destination_cluster_id,
            renamer=self.renamer,
            header=self.config.provenance.header,
            provenance_enabled=self.config.provenance.enabled,
            filter_overrides=self.config.provenance.filter_overrides,
            preserve_partitions=topics.preserve_partitions,
        )
        if not topics.preserve_partitions or not self.config.provenance.enabled:
            self.log("warning: exactly-once after a crash needs preserve_partitions and provenance; "
                     "this flow is at-least-once (a replayed batch may be written twice)")

    @property
    def checkpoint(self) -> str:
        return f"{self.config.streaming.checkpoint_dir.rstrip('/')}/replicate"

    def _write_batch(self, batch: DataFrame, batch_id: int, first: bool) -> None:
        replicated = self.topic_sync.sync()
        if first and self.plan.preserve_partitions and self.plan.provenance_enabled:
            batch = self._skip_already_copied(batch, batch_id, replicated)
        (
            batch.transform(to_sink_rows(self.plan.preserve_partitions))
            .write.format("kafka")
            .options(**sink_options(self.config))
            .save()
        )

    def _skip_already_copied(self, batch: DataFrame, batch_id: int, replicated: dict[str, int]) -> DataFrame:
        scanner = CopiedScanner(self.config.destination.client_properties(), self.plan.header,
                                self.source_cluster_id, log=self.log)
        pairs = [(t, p, self.renamer.format_remote_topic(t)) for t, n in replicated.items() for p in range(n)]
        marks = scanner.watermarks(pairs)
        if marks:
            shown = ", ".join(f"{t}[{p}]<={o}" for t, p, o in marks[:6]) + (" ..." if len(marks) > 6 else "")
            self.log(f"batch {batch_id}: first batch since start; the destination already holds origin offsets "
                     f"{shown}; records at or below those are skipped, not written twice")
        return batch.transform(drop_already_copied(self.spark, marks)).where(~F.col("_already_copied"))

    def start(self) -> StreamingQuery:
        self.topic_sync.sync()
        state = {"first": True}

        def write(batch: DataFrame, batch_id: int) -> None:
            first, state["first"] = state["first"], False
            self._write_batch(batch, batch_id, first)

        stream = (
            self.spark.readStream.format("kafka").options(**source_options(self.config)).load()
            .transform(prepare(self.plan))
        )
        return (
            stream.writeStream.queryName(f"replicate-{self.config.name}")
            .foreachBatch(write)
            .option("checkpointLocation", self.checkpoint)
            .trigger(processingTime=self.config.streaming.trigger_interval)
            .start()
        )


def run_until_stopped(flow: ReplicationFlow, stop: threading.Event | None = None, max_backoff_s: float = 30.0) -> None:
    """Runs the flow until SIGINT/SIGTERM (or `stop`), restarting the query after a failure."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    listener = flow.progress
    flow.spark.streams.addListener(listener)
    backoff = 1.0
    try:
        while not stop.is_set():
            query = flow.start()
            flow.log(f"replicating {flow.config.source.alias} ({flow.source_cluster_id}) -> "
                     f"{flow.config.destination.alias} ({flow.destination_cluster_id}); "
                     f"checkpoint {flow.checkpoint}")
            while query.isActive and not stop.is_set():
                query.awaitTermination(1)
            if stop.is_set():
                query.stop()
                break
            error = query.exception()
            first_line = str(error).strip().splitlines()[0] if error else "query stopped"
            flow.log(f"query failed: {first_line}; restarting from the checkpoint in {backoff:.0f}s")
            stop.wait(backoff)
            backoff = min(backoff * 2, max_backoff_s)
    finally:
        try:
            flow.spark.streams.removeListener(listener)
        except Exception:  # the JVM may already be gone when the whole process group got the signal
            pass
        flow.log("stopped")
        sys.stdout.flush()

