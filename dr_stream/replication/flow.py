"""One replication flow: a Spark application with one streaming query and three driver threads.

1. replicate (Spark query): Spark's Kafka source -> `record_path.prepare` (Column
   expressions) -> `foreachBatch` -> Spark's Kafka sink, whose producer reports each run it
   wrote to the flow's runs topic (`CopyRunInterceptor`). The batch function does the
   driver-side work that must happen before a write: create or grow destination topics
   (`topic_sync`), and on the first batch after a (re)start, bring the offset index level with
   the destination and skip what a killed run already wrote (`resume`).
2. index feed (thread): runs topic -> the live offset index and its Delta table
   (`offsets.index_feed`).
3. translate loop (thread): `__consumer_timestamps` -> translated offsets -> destination groups
   (`offsets.translate_loop`), fed by the committed-offset poller (thread, `offsets.poller`).
The query restarts from its checkpoint after a failure (`supervisor`); each thread reports
errors and keeps going.

Invariant: constructing a flow connects to nothing; `connect` meets both clusters, learns
their cluster.ids and builds the queries, and `close` releases every client it opened.
"""

from __future__ import annotations

import threading
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
from dr_stream.offsets.index_feed import IndexFeed
from dr_stream.offsets.poller import CommittedOffsetPoller
from dr_stream.offsets.returned_records import ReturnedRecords, maps_back
from dr_stream.offsets.runs_topic import ensure_runs_topic, runs_topic
from dr_stream.offsets.translate_loop import TranslateLoop
from dr_stream.offsets.translation_log import TranslationLog
from dr_stream.offsets.translator import OffsetTranslator
from dr_stream.replication.left_out import left_out_group, read_left_out
from dr_stream.replication.progress import ProgressPrinter
from dr_stream.replication.record_path import ReplicationPlan, prepare, to_sink_rows
from dr_stream.replication.resume import ALREADY_COPIED, drop_already_copied, resume_marks
from dr_stream.replication.topic_sync import TopicSync
from dr_stream.streaming import start_batch_query

Worker = tuple[str, Callable[[threading.Event], None]]


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
        self.progress = ProgressPrinter(self.config.name, self.config.query_name("replicate"),
                                        on_batch=self._on_replicated)
        self.index = OffsetIndex(self.spark, self.config.streaming.offset_index)
        self.runs_topic = runs_topic(self.config.name)
        self.connected = False
        self.translate_loop: TranslateLoop | None = None
        self.feed: IndexFeed | None = None
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
        self.feed = self._feed() if config.provenance.enabled else None
        if self.feed is None:
            self.log("warning: provenance is off, so there is no offset index and no offset translation")
        self.translate_loop = self._translate_loop() if self.feed else None
        if self.translate_loop:
            self.feed.on_advanced = self.translate_loop.on_index_advanced
        self.poller = CommittedOffsetPoller(config.source, config.group_filter, config.topic_filter,
                                            log=self.log) if self.translate_loop else None
        self.connected = True

    def close(self) -> None:
        """Releases the clients the translate loop and the feed opened (the poller closes its own)."""
        if self.translate_loop is not None:
            self.translate_loop.close()
        if self.feed is not None:
            self.feed.close()

    def _feed(self) -> IndexFeed:
        if ensure_runs_topic(self._dest_admin, self.runs_topic):
            self.log(f"topic {self.runs_topic}: created on {self.config.destination.alias} (compacted)")

        def dest_bounds() -> dict[tuple[str, int], tuple[int, int]]:
            return log_bounds(self._dest_admin, matching_partitions(self._dest_admin, self.config.remote_topic_filter))

        feed = IndexFeed(
            spark=self.spark, index=self.index, destination=self.config.destination, runs_topic=self.runs_topic,
            source_cluster_id=self.source_cluster_id, header=self.config.provenance.header,
            renamer=self.config.renamer, dest_bounds=dest_bounds, log=self.log,
        )
        feed.load()
        return feed

    def _on_replicated(self, end_offsets: str | None) -> None:
        if self.feed is not None:
            self.feed.replicated(end_offsets)

    def _translate_loop(self) -> TranslateLoop | None:
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
        translator = OffsetTranslator(self.feed.locate, config.renamer, config.destination, source=config.source,
                                      returned=returned)
        loop = TranslateLoop(
            source=config.source, translator=translator,
            record=TranslationLog(self.spark, config.streaming.translations),
            sync=GroupSync(config.destination, config.name) if config.offsets.sync_to_destination else None,
            groups=config.group_filter, topics=config.topic_filter, log=self.log,
        )
        loop.restore()
        return loop

    def queries(self) -> list[tuple[str, Callable[[], StreamingQuery]]]:
        return [(self.config.query_name("replicate"), self._in_pool("replicate", self.start))]

    def workers(self) -> list[Worker]:
        """The flow's driver threads: each runs until the event it is given is set."""
        out: list[Worker] = []
        for name, part in (("index-feed", self.feed), ("translate", self.translate_loop), ("poller", self.poller)):
            if part is not None:
                out.append((f"{name}-{self.config.name}", part.run))
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
        if first and self.plan.preserve_partitions and self.feed is not None:
            batch = self._skip_already_copied(batch, batch_id, replicated)
        (
            batch.transform(to_sink_rows(self.plan.preserve_partitions))
            # One write task per core instead of one per source partition: a small batch spends more
            # on scheduling tasks than on writing. coalesce keeps each partition's records in order.
            .coalesce(max(1, self.spark.sparkContext.defaultParallelism))
            .write.format("kafka")
            .options(**spark_options.sink(self.config.destination, self.runs_topic if self.feed else None,
                                          self.plan.header))
            .save()
        )

    def _skip_already_copied(self, batch: DataFrame, batch_id: int, replicated: dict[str, int]) -> DataFrame:
        # The index, once level with the destination, knows the last origin offset copied to each
        # partition: no scan of the destination from its end, partition by partition.
        self.feed.catch_up()
        copied = {k: o for k, o in self.feed.last_copied().items() if k[0] in replicated}
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
