"""One replication flow: a Spark application with three streaming queries and a poller.

1. replicate: Spark's Kafka source -> `replicate.prepare` (Column expressions) ->
   `foreachBatch` -> Spark's Kafka sink. The batch function does the driver-side work that
   must happen before a write: create or grow destination topics, and on the first batch
   after a (re)start, skip what a killed run already wrote (`already_copied`).
2. index: the destination's copies read back into the offset index (`index`).
3. translate: `__consumer_timestamps` -> translated offsets -> destination groups
   (`translate_query`), fed by the committed-offset poller (`group_poller`).
Each query has its own checkpoint and restarts on its own after a failure.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from dr_stream import consumer_timestamps
from dr_stream.already_copied import CopiedScanner, drop_already_copied
from dr_stream.config import ClusterConfig, FlowConfig
from dr_stream.failover import maps_back
from dr_stream.group_poller import CommittedOffsetPoller
from dr_stream.index import OffsetIndex, OffsetIndexer
from dr_stream.offset_sync import OffsetSync
from dr_stream.policy import GroupFilter, TopicFilter, TopicRenamer
from dr_stream.progress import ProgressPrinter
from dr_stream.replicate import TIMESTAMP_INTERCEPTOR, ReplicationPlan, prepare, to_sink_rows
from dr_stream.returned_records import ReturnedRecords
from dr_stream.topics import TopicSync, admin_client, cluster_id, log_bounds, matching_partitions
from dr_stream.translate import OffsetTranslator
from dr_stream.translate_query import TranslateQuery
from dr_stream.translation_log import TranslationLog
from dr_stream.unreplicated import read_skip_marks, skip_group


def _log_to(name: str) -> Callable[[str], None]:
    def log(message: str) -> None:
        print(f"[{name}] {message}", flush=True)

    return log


def _client_options(cluster) -> dict[str, str]:
    options = {"kafka.bootstrap.servers": cluster.bootstrap_servers}
    options.update({f"kafka.{k}": v for k, v in cluster.kafka.items()})
    return options


def source_options(config: FlowConfig, pattern: str | None = None) -> dict[str, str]:
    topic_filter = TopicFilter(config.topics.include, config.topics.exclude)
    options = {
        "subscribePattern": pattern or topic_filter.subscribe_pattern(),
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
    return {**options, **_client_options(config.source)}


def index_options(config: FlowConfig) -> dict[str, str]:
    """The index query reads the flow's destination topics the way replicate reads the source."""
    renamer = TopicRenamer(config.topics.rename)
    pattern = renamer.remote_filter(TopicFilter(config.topics.include, config.topics.exclude)).subscribe_pattern()
    return {**source_options(config, pattern), **_client_options(config.destination)}


def sink_options(destination: ClusterConfig) -> dict[str, str]:
    options = {
        # Ordering per partition, with retries, is what makes the crash-replay filter exact.
        "kafka.acks": "all",
        "kafka.enable.idempotence": "true",
        "kafka.max.in.flight.requests.per.connection": "5",
        "kafka.linger.ms": "5",
        "kafka.batch.size": "262144",
    }
    options["kafka.bootstrap.servers"] = destination.bootstrap_servers
    options.update({f"kafka.{k}": v for k, v in destination.kafka.items()})
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
        self.index = OffsetIndex(self.spark, self.config.streaming.offset_index)
        self.translate_query = self._translate_query()
        self.indexer = self._indexer() if self.config.provenance.enabled else None
        if self.indexer is None:
            self.log("warning: provenance is off, so there is no offset index and no offset translation")
        self.poller = self._poller() if self.translate_query else None

    def _follower_trigger(self) -> str:
        """Index and translate run at the flow's trigger but at least 1 s apart: each of their batches
        commits to Delta, and below a second that costs the copy more than it gains in freshness."""
        streaming = self.config.streaming
        return streaming.trigger_interval if streaming.trigger_ms >= 1000 else "1 second"

    def _checkpoint(self, query: str) -> str:
        return f"{self.config.streaming.checkpoint_dir.rstrip('/')}/{query}"

    def _indexer(self) -> OffsetIndexer:
        remote = self.renamer.remote_filter(TopicFilter(self.config.topics.include, self.config.topics.exclude))

        def log_starts() -> list[tuple[str, int, int]]:
            bounds = log_bounds(self._dest_admin, matching_partitions(self._dest_admin, remote))
            return [(t, p, start) for (t, p), (start, _) in bounds.items()]

        return OffsetIndexer(
            spark=self.spark, index=self.index, kafka_options=index_options(self.config),
            source_cluster_id=self.source_cluster_id, header=self.config.provenance.header, renamer=self.renamer,
            query_name=f"index-{self.config.name}", checkpoint=self._checkpoint("index"),
            trigger=self._follower_trigger(), log_starts=log_starts,
            on_advanced=self.translate_query.on_index_advanced if self.translate_query else (lambda: None),
            log=self.log,
        )

    def _translate_query(self) -> TranslateQuery | None:
        offsets = self.config.offsets
        if not offsets.translate or not self.config.provenance.enabled:
            return None
        if not self.plan.preserve_partitions:
            self.log("warning: offset translation needs preserve_partitions: true; offsets are not translated")
            return None
        if consumer_timestamps.ensure_topic(self._source_admin):
            self.log(f"topic {consumer_timestamps.TOPIC}: created on {self.config.source.alias} (compacted)")
        translator = OffsetTranslator(
            self.spark, self.index, self.renamer, self.config.destination.client_properties(),
            source=self.config.source.client_properties(), origin_cluster=self.source_cluster_id,
            returned=ReturnedRecords(self.config.source.client_properties(), self.config.provenance.header,
                                     self.destination_cluster_id) if maps_back(self.config) else None,
        )
        query = TranslateQuery(
            spark=self.spark, translator=translator,
            record=TranslationLog(self.spark, self.config.streaming.translations),
            sync=OffsetSync(self.config.destination.client_properties(), self.config.name)
            if offsets.sync_to_destination else None,
            groups=GroupFilter(offsets.groups.include, offsets.groups.exclude),
            topics=TopicFilter(self.config.topics.include, self.config.topics.exclude),
            kafka_options=_client_options(self.config.source), query_name=f"translate-{self.config.name}",
            checkpoint=self._checkpoint("translate"), trigger=self._follower_trigger(), log=self.log,
        )
        query.restore()
        return query

    def _poller(self) -> CommittedOffsetPoller:
        offsets = self.config.offsets
        return CommittedOffsetPoller(
            self.config.source.client_properties(), GroupFilter(offsets.groups.include, offsets.groups.exclude),
            TopicFilter(self.config.topics.include, self.config.topics.exclude), log=self.log,
        )

    def queries(self) -> list[tuple[str, Callable[[], StreamingQuery]]]:
        out = [(f"replicate-{self.config.name}", self._in_pool("replicate", self.start))]
        if self.indexer:
            out.append((self.indexer.query_name, self._in_pool("index", self.indexer.start)))
        if self.translate_query:
            out.append((self.translate_query.query_name, self._in_pool("translate", self.translate_query.start)))
        return out

    def _in_pool(self, pool: str, start: Callable[[], StreamingQuery]) -> Callable[[], StreamingQuery]:
        """A query's jobs run in the scheduler pool set on the thread that starts it (session.py)."""

        def started() -> StreamingQuery:
            context = self.spark.sparkContext
            context.setLocalProperty("spark.scheduler.pool", pool)
            try:
                return start()
            finally:
                context.setLocalProperty("spark.scheduler.pool", None)

        return started

    @property
    def checkpoint(self) -> str:
        return self._checkpoint("replicate")

    def _write_batch(self, batch: DataFrame, batch_id: int, first: bool) -> None:
        replicated = self.topic_sync.sync()
        if first and self.plan.preserve_partitions and self.plan.provenance_enabled:
            batch = self._skip_already_copied(batch, batch_id, replicated)
        (
            batch.transform(to_sink_rows(self.plan.preserve_partitions))
            # One write task per core instead of one per source partition: a small batch spends more
            # on scheduling tasks than on writing. coalesce keeps each partition's records in order.
            .coalesce(self._write_tasks)
            .write.format("kafka")
            .options(**sink_options(self.config.destination))
            .save()
        )

    @property
    def _write_tasks(self) -> int:
        return max(1, self.spark.sparkContext.defaultParallelism)

    def _skip_already_copied(self, batch: DataFrame, batch_id: int, replicated: dict[str, int]) -> DataFrame:
        scanner = CopiedScanner(self.config.destination.client_properties(), self.plan.header,
                                self.source_cluster_id, log=self.log)
        pairs = [(t, p, self.renamer.format_remote_topic(t)) for t, n in replicated.items() for p in range(n)]
        marks = {(t, p): o for t, p, o in scanner.watermarks(pairs)}
        left_out = read_skip_marks(self.config.source.client_properties(), self.destination_cluster_id)
        if left_out:
            shown = ", ".join(f"{t}[{p}]<={o}" for (t, p), o in sorted(left_out.items())[:6])
            self.log(f"batch {batch_id}: records left out at failback are not copied ({shown}; group "
                     f"{skip_group(self.destination_cluster_id)} on {self.config.source.alias})")
            for key, offset in left_out.items():
                marks[key] = max(offset, marks.get(key, -1))
        ends = {k: end for k, (_, end) in log_bounds(self._source_admin, sorted(marks)).items()}
        for (topic, partition), offset in sorted(marks.items()):
            end = ends.get((topic, partition), 0)
            if offset >= end:
                # The source ends before offsets already handled: the topic was recreated (a full
                # restore), so those marks say nothing about today's offsets and must not skip anything.
                self.log(f"batch {batch_id}: {topic}[{partition}] ends at {end}, below origin offset {offset} "
                         "already handled; the topic was recreated, so nothing is skipped there")
                del marks[(topic, partition)]
        if marks:
            shown = ", ".join(f"{t}[{p}]<={o}" for (t, p), o in sorted(marks.items())[:6])
            more = " ..." if len(marks) > 6 else ""
            self.log(f"batch {batch_id}: first batch since start; origin offsets {shown}{more} are already on the "
                     "destination (or were left out), so records at or below them are skipped, not written twice")
        rows = [(t, p, o) for (t, p), o in sorted(marks.items())]
        return batch.transform(drop_already_copied(self.spark, rows)).where(~F.col("_already_copied"))

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


def _error_line(error) -> str:
    """One readable line: for an error raised in a foreachBatch function, the Python exception."""
    if not error:
        return "query stopped"
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if "Python Proxy" in lines[0]:
        python = [line for line in lines if not line.startswith(("at ", "File ", "^", "~"))]
        errors = [line for line in python if ("Error" in line or "Exception" in line) and ":" in line]
        return errors[-1] if errors else lines[-1]
    return lines[0]


@dataclass
class _Supervised:
    name: str
    start: Callable[[], StreamingQuery]
    query: StreamingQuery | None = None
    started_at: float = 0.0
    backoff: float = 1.0
    restart_at: float | None = 0.0

    def launch(self) -> None:
        self.query, self.started_at, self.restart_at = self.start(), time.monotonic(), None


@dataclass
class _Supervisor:
    """Keeps each query of a flow running; a failed one restarts from its checkpoint with backoff."""

    flow: ReplicationFlow
    max_backoff_s: float
    parts: list[_Supervised] = field(default_factory=list)

    def check(self) -> None:
        now = time.monotonic()
        for part in self.parts:
            if part.restart_at is not None:
                if now >= part.restart_at:
                    part.launch()
                continue
            if part.query.isActive:
                continue
            first_line = _error_line(part.query.exception())
            if now - part.started_at > 60:
                part.backoff = 1.0
            self.flow.log(f"{part.name} failed: {first_line}; restarting from its checkpoint in {part.backoff:.0f}s")
            part.restart_at = now + part.backoff
            part.backoff = min(part.backoff * 2, self.max_backoff_s)

    def stop(self, grace_s: float = 30.0) -> None:
        """Stops each query between batches when it can: an interrupted batch would have to be
        replayed, and an interrupted translation-log write would lose the newest positions."""
        deadline = time.monotonic() + grace_s
        for part in self.parts:
            if part.query is None or not part.query.isActive:
                continue
            while part.query.status.get("isTriggerActive") and time.monotonic() < deadline:
                time.sleep(0.1)
            part.query.stop()


def run_until_stopped(flow: ReplicationFlow, stop: threading.Event | None = None, max_backoff_s: float = 30.0) -> None:
    """Runs the flow's queries and poller until SIGINT/SIGTERM (or `stop`), restarting failed queries."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    listener = flow.progress
    flow.spark.streams.addListener(listener)
    supervisor = _Supervisor(flow, max_backoff_s, [_Supervised(name, start) for name, start in flow.queries()])
    poller = None
    if flow.poller:
        poller = threading.Thread(target=flow.poller.run, args=(stop,), name=f"poller-{flow.config.name}", daemon=True)
        poller.start()
    try:
        supervisor.check()
        flow.log(f"replicating {flow.config.source.alias} ({flow.source_cluster_id}) -> "
                 f"{flow.config.destination.alias} ({flow.destination_cluster_id}); queries "
                 f"{', '.join(p.name for p in supervisor.parts)}; "
                 f"checkpoints under {flow.config.streaming.checkpoint_dir}")
        while not stop.is_set():
            stop.wait(1)
            if not stop.is_set():
                supervisor.check()
    finally:
        stop.set()
        try:
            supervisor.stop()
            flow.spark.streams.removeListener(listener)
        except Exception:  # the JVM may already be gone when the whole process group got the signal
            pass
        if poller:
            poller.join(timeout=15)
        flow.log("stopped")
        sys.stdout.flush()
