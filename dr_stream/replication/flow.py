"""One replication flow: a Spark application with three streaming queries and a poller.

1. replicate: Spark's Kafka source -> `record_path.prepare` (Column expressions) ->
   `foreachBatch` -> Spark's Kafka sink. The batch function does the driver-side work that
   must happen before a write: create or grow destination topics (`topic_sync`), and on the
   first batch after a (re)start, skip what a killed run already wrote (`resume`).
2. index: the destination's copies read back into the offset index (`offsets.index_query`).
3. translate: `__consumer_timestamps` -> translated offsets -> destination groups
   (`offsets.translate_query`), fed by the committed-offset poller (`offsets.poller`).
Each query has its own checkpoint and restarts on its own after a failure (`supervisor`).

Invariant: constructing a flow connects to nothing; `connect` meets both clusters, learns
their cluster.ids and builds the queries, and `close` releases every client it opened.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from dr_stream.config import FlowConfig
from dr_stream.kafka import clients, spark_options
from dr_stream.kafka.admin import log_bounds, matching_partitions
from dr_stream.kafka.reachability import require_cluster_id
from dr_stream.offsets import consumer_timestamps
from dr_stream.offsets.group_sync import GroupSync
from dr_stream.offsets.index import OffsetIndex
from dr_stream.offsets.index_query import OffsetIndexer
from dr_stream.offsets.poller import CommittedOffsetPoller
from dr_stream.offsets.returned_records import ReturnedRecords, maps_back
from dr_stream.offsets.translate_query import TranslateQuery
from dr_stream.offsets.translation_log import TranslationLog
from dr_stream.offsets.translator import OffsetTranslator
from dr_stream.replication.left_out import left_out_group, read_left_out
from dr_stream.replication.progress import ProgressPrinter
from dr_stream.replication.record_path import ReplicationPlan, prepare, to_sink_rows
from dr_stream.replication.resume import ALREADY_COPIED, LastCopiedScan, drop_already_copied, resume_marks
from dr_stream.replication.topic_sync import TopicSync
from dr_stream.streaming import start_batch_query


def _log_to(name: str) -> Callable[[str], None]:
    def log(message: str) -> None:
        print(f"[{name}] {message}", flush=True)

    return log


def _shown(marks: dict[tuple[str, int], int], most: int = 6) -> str:
    shown = ", ".join(f"{t}[{p}]<={o}" for (t, p), o in sorted(marks.items())[:most])
    return shown + (" ..." if len(marks) > most else "")


@dataclass
class ReplicationFlow:
    config: FlowConfig
    spark: SparkSession
    log: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        self.log = self.log or _log_to(self.config.name)
        self.progress = ProgressPrinter(self.config.name, self.config.query_name("replicate"))
        self.index = OffsetIndex(self.spark, self.config.streaming.offset_index)
        self.connected = False
        self.translate_query: TranslateQuery | None = None
        self.indexer: OffsetIndexer | None = None
        self.poller: CommittedOffsetPoller | None = None

    def connect(self) -> None:
        """Meets both clusters and builds what runs the flow; a second call does nothing."""
        if self.connected:
            return
        config = self.config
        self._source_admin = clients.admin(config.source)
        self._dest_admin = clients.admin(config.destination)
        self.source_cluster_id = require_cluster_id(config.source)
        self.destination_cluster_id = require_cluster_id(config.destination)
        if self.source_cluster_id == self.destination_cluster_id:
            raise ValueError(f"{config.path}: source and destination are the same cluster "
                             f"({self.source_cluster_id})")
        topics = config.topics
        self.topic_sync = TopicSync(self._source_admin, self._dest_admin, config.topic_filter, config.renamer,
                                    config.source, config.destination, sync_configs=topics.sync_configs,
                                    log=self.log)
        self.plan = ReplicationPlan(
            source_cluster_id=self.source_cluster_id, destination_cluster_id=self.destination_cluster_id,
            renamer=config.renamer, header=config.provenance.header, provenance_enabled=config.provenance.enabled,
            filter_overrides=config.provenance.filter_overrides, preserve_partitions=topics.preserve_partitions,
        )
        if not topics.preserve_partitions or not config.provenance.enabled:
            self.log("warning: exactly-once after a crash needs preserve_partitions and provenance; "
                     "this flow is at-least-once (a replayed batch may be written twice)")
        self.translate_query = self._translate_query()
        self.indexer = self._indexer() if config.provenance.enabled else None
        if self.indexer is None:
            self.log("warning: provenance is off, so there is no offset index and no offset translation")
        self.poller = CommittedOffsetPoller(config.source, config.group_filter, config.topic_filter,
                                            log=self.log) if self.translate_query else None
        self.connected = True

    def close(self) -> None:
        """Releases the clients the translate query opened (the poller closes its own when it stops)."""
        if self.translate_query is not None:
            self.translate_query.close()

    def _follower_trigger(self) -> str:
        """Index and translate run at the flow's trigger but at least 1 s apart: each of their batches
        commits to Delta, and below a second that costs the copy more than it gains in freshness."""
        streaming = self.config.streaming
        return streaming.trigger_interval if streaming.trigger_ms >= 1000 else "1 second"

    def _indexer(self) -> OffsetIndexer:
        def log_starts() -> list[tuple[str, int, int]]:
            partitions = matching_partitions(self._dest_admin, self.config.remote_topic_filter)
            return [(t, p, start) for (t, p), (start, _) in log_bounds(self._dest_admin, partitions).items()]

        return OffsetIndexer(
            spark=self.spark, index=self.index, kafka_options=spark_options.index_source(self.config),
            source_cluster_id=self.source_cluster_id, header=self.config.provenance.header,
            renamer=self.config.renamer, query_name=self.config.query_name("index"),
            checkpoint=self.config.checkpoint("index"), trigger=self._follower_trigger(), log_starts=log_starts,
            on_advanced=self.translate_query.on_index_advanced if self.translate_query else (lambda: None),
            log=self.log,
        )

    def _translate_query(self) -> TranslateQuery | None:
        config = self.config
        if not config.offsets.translate or not config.provenance.enabled:
            return None
        if not self.plan.preserve_partitions:
            self.log("warning: offset translation needs preserve_partitions: true; offsets are not translated")
            return None
        if consumer_timestamps.ensure_topic(self._source_admin):
            self.log(f"topic {consumer_timestamps.TOPIC}: created on {config.source.alias} (compacted)")
        returned = (ReturnedRecords(config.source, config.provenance.header, self.destination_cluster_id)
                    if maps_back(config) else None)
        translator = OffsetTranslator(self.spark, self.index, config.renamer, config.destination,
                                      source=config.source, origin_cluster=self.source_cluster_id, returned=returned)
        query = TranslateQuery(
            spark=self.spark, translator=translator,
            record=TranslationLog(self.spark, config.streaming.translations),
            sync=GroupSync(config.destination, config.name) if config.offsets.sync_to_destination else None,
            groups=config.group_filter, topics=config.topic_filter,
            kafka_options=spark_options.topic_source(config.source, consumer_timestamps.TOPIC),
            query_name=config.query_name("translate"), checkpoint=config.checkpoint("translate"),
            trigger=self._follower_trigger(), log=self.log,
        )
        query.restore()
        return query

    def queries(self) -> list[tuple[str, Callable[[], StreamingQuery]]]:
        out = [(self.config.query_name("replicate"), self._in_pool("replicate", self.start))]
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

    def _write_batch(self, batch: DataFrame, batch_id: int, first: bool) -> None:
        replicated = self.topic_sync.sync()
        if first and self.plan.preserve_partitions and self.plan.provenance_enabled:
            batch = self._skip_already_copied(batch, batch_id, replicated)
        (
            batch.transform(to_sink_rows(self.plan.preserve_partitions))
            # One write task per core instead of one per source partition: a small batch spends more
            # on scheduling tasks than on writing. coalesce keeps each partition's records in order.
            .coalesce(max(1, self.spark.sparkContext.defaultParallelism))
            .write.format("kafka")
            .options(**spark_options.sink(self.config.destination))
            .save()
        )

    def _skip_already_copied(self, batch: DataFrame, batch_id: int, replicated: dict[str, int]) -> DataFrame:
        scan = LastCopiedScan(self.config.destination, self.plan.header, self.source_cluster_id)
        copied = scan.watermarks((t, p, self.config.renamer.format_remote_topic(t))
                                 for t, n in replicated.items() for p in range(n))
        left_out = read_left_out(self.config.source, self.destination_cluster_id,
                                 ((t, p) for t, n in replicated.items() for p in range(n)))
        if left_out:
            self.log(f"batch {batch_id}: records left out at failback are not copied ({_shown(left_out)}; group "
                     f"{left_out_group(self.destination_cluster_id)} on {self.config.source.alias})")
        wanted = set(copied) | set(left_out)
        ends = {k: end for k, (_, end) in log_bounds(self._source_admin, sorted(wanted)).items()}
        marks = resume_marks(copied, left_out, ends)
        for (topic, partition), end, offset in marks.recreated:
            self.log(f"batch {batch_id}: {topic}[{partition}] ends at {end}, below origin offset {offset} "
                     "already handled; the topic was recreated, so nothing is skipped there")
        if marks.skip_through:
            self.log(f"batch {batch_id}: first batch since start; origin offsets {_shown(marks.skip_through)} are "
                     "already on the destination (or were left out), so records at or below them are skipped, "
                     "not written twice")
        return batch.transform(drop_already_copied(self.spark, marks.skip_through)).where(~F.col(ALREADY_COPIED))

    def start(self) -> StreamingQuery:
        """Starts the replicate query (after one topic sync, so its topics exist before a batch)."""
        self.connect()
        self.topic_sync.sync()
        state = {"first": True}

        def write(batch: DataFrame, batch_id: int) -> None:
            first, state["first"] = state["first"], False
            self._write_batch(batch, batch_id, first)

        return start_batch_query(self.spark, spark_options.replicate_source(self.config),
                                 self.config.query_name("replicate"), write, self.config.checkpoint("replicate"),
                                 self.config.streaming.trigger_interval, transform=prepare(self.plan))
