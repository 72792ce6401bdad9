"""One replication flow: a Spark application with two streaming queries and six driver threads.

1. replicate (Spark query): Spark's Kafka source -> `record_path.prepare` (Column
   expressions) -> the crash-resume filter and the holds (`resume`, `holds`: fixed when the
   query starts) -> dr-stream's sink (jvm/ `CopySink`), which writes each remaining source row as
   its copy and reports each run it wrote to the flow's runs topic. No `foreachBatch`, so the
   same plan runs in micro-batch and in real-time mode (`streaming.mode`). In micro-batch mode
   its trigger widens once batches run back to back on a few records per partition
   (`trigger_width`).
2. topics (thread): creates and grows destination topics and follows their configs
   (`topic_sync`); restarts the query when it must subscribe to a new topic (`topic_watch`). Beside it, the
   lag sampler (thread, `lag_sampler`) measures lag and probes both clusters for the metrics, and
   with `acls.enabled` the ACL sync (thread, `acl_sync`) copies topic and group ACLs.
3. index feed (thread): runs topic -> the live offset index and its Delta table
   (`index.index_feed`).
4. translate (Spark query, micro-batch in both modes): `__consumer_timestamps` -> each batch's
   newest positions joined with the live index -> destination groups and the translation log
   (`positions.translate_query`). The committed-offset poller (thread, `positions.poller`) writes
   unmodified consumers' positions to that topic and hands them over in process; a translation
   thread (`positions.live_translation`) translates those at once, again as the index advances,
   and retries failed syncs; beside it a thread appends to the translation log.
Each query restarts from its own checkpoint after a failure (`supervisor`), except that a
record the destination refuses holds its partition and the query goes on without it at once
(`holds`); each thread reports errors and keeps going.

Invariants: a flow is made by `build_flow` alone, and making one connects to nothing; `connect`
meets both clusters, learns their cluster.ids and builds every part, then subscribes each part to
the ones it follows, so no part calls one that does not exist yet (the parts a config leaves out
stay None for good); `close` releases every client it opened.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from functools import partial
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from dr_stream.core.config import FlowConfig
from dr_stream.core.contracts import CONSUMER_TIMESTAMPS_TOPIC, COPY_SINK, runs_topic
from dr_stream.failure_notes import first_line
from dr_stream.index import (
    IDLE_AFTER_S,
    IndexFeed,
    LivePosition,
    OffsetIndex,
    RunStore,
    ensure_runs_topic,
    runs_trim,
    settle_runs_topic,
)
from dr_stream.kafka import spark_options
from dr_stream.kafka.admin import log_bounds, matching_partitions, partition_counts
from dr_stream.kafka.cluster_context import FlowClusters
from dr_stream.kafka.group_offsets.kafka4 import Kafka4Groups, StreamsGroupStates, flow_helper
from dr_stream.log_format import flow_logger
from dr_stream.phase_clock import PhaseClock
from dr_stream.positions import (
    CommittedOffsetPoller,
    LiveTranslation,
    ShareGroupSync,
    TranslateQuery,
    ensure_consumer_timestamps,
    settle_consumer_timestamps,
)
from dr_stream.replication.acl_ledger import AclLedger
from dr_stream.replication.acl_sync import AclPass, AclSync
from dr_stream.replication.flow_metrics import FlowMetrics
from dr_stream.replication.holds import PartitionHolds, clamped
from dr_stream.replication.lag_sampler import LagSampler
from dr_stream.replication.loss_watch import LossWatch
from dr_stream.replication.losses import KEPT_S, LossLedger
from dr_stream.replication.progress import BatchRead, ProgressPrinter, QueryProgress
from dr_stream.replication.record_path import ReplicationPlan, prepare
from dr_stream.replication.resume import Resume, marks_at_start, unwritten_at_start
from dr_stream.replication.task_slots import require_slots
from dr_stream.replication.topic_sync import TopicSync
from dr_stream.replication.topic_watch import TopicWatch
from dr_stream.replication.trigger_width import BatchCost, TriggerWidth, seconds
from dr_stream.runtime.delta_appends import DeltaAppends
from dr_stream.runtime.delta_reads import DeltaReads
from dr_stream.runtime.provenance_columns import destination_originals, written_copies
from dr_stream.runtime.recorded_clusters import RecordedClusters
from dr_stream.runtime.session import in_pool
from dr_stream.runtime.unfinished_writes import drop_unfinished_writes

Worker = tuple[str, Callable[[threading.Event], None]]


def build_flow(config: FlowConfig, spark: SparkSession, *, log: Callable[[str], None] | None = None,
               clock: PhaseClock | None = None, index_prefetch: Future[Any] | None = None,
               clusters: FlowClusters | None = None) -> ReplicationFlow:
    """The one way a flow is made: `dr-stream run`, failback's copy back, the demo and the tests
    all come here, and run what it gives with `supervisor.run_until_stopped` (in the foreground)
    or `supervisor.running_in_background`. `log`: where its lines go (a command running it among
    its steps prefixes them), else the flow's logger; `clock`, `index_prefetch`: a start-up that
    began before the Spark session (`dr-stream run`); `clusters`: a command's cluster contexts,
    which it closes, else the flow's own. Connects to nothing until the flow starts."""
    return ReplicationFlow(config, spark, log=log, clock=clock, index_prefetch=index_prefetch, clusters=clusters)


def live_positions(loop: LiveTranslation) -> list[LivePosition]:
    """The positions the groups hold (the translate loop's newest), each idle once it has not
    moved for `IDLE_AFTER_S`: runs below the lowest active one may become spans, and idle ones pin
    their runs (`spans`)."""
    latest = dict(loop.latest)  # one copy under the GIL: the loop's thread writes it
    still = loop.still_for()
    return [LivePosition(c.topic, c.partition, c.offset, still.get(key, 0.0) >= IDLE_AFTER_S)
            for key, c in latest.items()]


class ReplicationFlow:
    def __init__(self, config: FlowConfig, spark: SparkSession, log: Callable[[str], None] | None = None,
                 clock: PhaseClock | None = None, index_prefetch: Future[Any] | None = None,
                 clusters: FlowClusters | None = None) -> None:
        """`clock`: started by the caller before the Spark session, so the session counts as a
        start-up phase; `index_prefetch`: the offset index read without Spark while the session
        started (`IndexReads.runs_and_positions`); `clusters`: the caller's cluster contexts (a
        command that runs a flow among its steps), else the flow's own, closed with it."""
        self.config, self.spark, self.index_prefetch = config, spark, index_prefetch
        self._own_clusters = clusters is None
        self.clusters = clusters or FlowClusters.of(config, lambda: spark)
        self.clock = clock or PhaseClock()
        self._launches = 0
        # Every line is said, a restart's as often as it happens; the loops hold back their own
        # repeated failure lines (`failure_notes.summarised`).
        self.log: Callable[[str], None] = log or flow_logger(config.name).info
        self.metrics = FlowMetrics(config.name, config.replicate_query,
                                   (config.source.alias, config.destination.alias))
        self.progress = ProgressPrinter(config.name, config.replicate_query, self.metrics, log=self.log,
                                        runs_published=config.provenance.enabled, on_cost=self._on_cost)
        self.translate_progress = QueryProgress(config.translate_query, self.metrics)
        streaming = config.streaming
        self.trigger = TriggerWidth(round(streaming.trigger_s * 1000), round(streaming.max_trigger_s * 1000),
                                    streaming.max_records_per_batch)
        # The flow's Delta appends from its driver, one writer for both tables (`runtime.delta_appends`).
        self.appends = DeltaAppends(self.log, self.metrics.appended_through_spark)
        self.index = OffsetIndex(self.spark, self.config.streaming.offset_index, self.appends,
                                 self.config.streaming.old_versions_retention_s)
        self.ledger = LossLedger(config.streaming.losses, DeltaReads(lambda: self.spark, self.log), latest=True,
                                 retention_s=config.streaming.old_versions_retention_s)
        self.holds = PartitionHolds(lambda: self.spark, config, self.ledger, self.log, self.metrics.partitions_held)
        self.runs_topic = runs_topic(self.config.name)
        self.connected = False
        self.translate_query: TranslateQuery | None = None
        self.translate_loop: LiveTranslation | None = None
        self.share_sync: ShareGroupSync | None = None
        self.kafka4: Kafka4Groups | None = None
        self.feed: IndexFeed | None = None
        self.poller: CommittedOffsetPoller | None = None
        self._marks: dict[tuple[str, int], int] = {}
        self._held: dict[tuple[str, int], int] = {}  # held partitions: the offset of the refused record
        self._left_out: dict[tuple[str, int], int] = {}
        self._read_through: dict[tuple[str, int], int] = {}
        self._restart_reason: str | None = None

    def connect(self) -> None:
        """Meets both clusters and builds what runs the flow; a second call does nothing."""
        if self.connected:
            return
        config = self.config
        self._source_admin = self.clusters.source.admin
        self._dest_admin = self.clusters.destination.admin
        self.source_cluster_id, self.destination_cluster_id = self.clusters.distinct_ids()
        # The state now belongs to these two clusters: a command or a start that meets another refuses it.
        record = RecordedClusters.of(config, lambda: self.spark, self.log)
        recorded = record.record(
            {"source": (config.source.alias, self.source_cluster_id),
             "destination": (config.destination.alias, self.destination_cluster_id)}, self.appends)
        if recorded:
            self.log(f"state under {config.streaming.checkpoint_dir} belongs to {config.source.alias} "
                     f"({self.source_cluster_id}) -> {config.destination.alias} ({self.destination_cluster_id}) "
                     f"from now on: recorded in {config.clusters_record}")
        self._record_release(record)
        self.clock.mark("clusters")
        topics = config.topics
        self.topic_sync = TopicSync(self._source_admin, self._dest_admin, config.topic_filter, config.renamer,
                                    config.source, config.destination, sync_configs=topics.sync_configs,
                                    log=self.log)
        self.acl_sync = AclSync(config, self.clusters.source, self.clusters.destination, self.log,
                                AclLedger(config, DeltaReads(lambda: self.spark, self.log), self.appends,
                                          lambda: self.spark),
                                on_pass=self._acls_synced) if config.acls.enabled else None
        self.plan = ReplicationPlan(
            source_cluster_id=self.source_cluster_id, destination_cluster_id=self.destination_cluster_id,
            renamer=config.renamer, header=config.provenance.header, provenance_enabled=config.provenance.enabled,
            filter_overrides=config.provenance.filter_overrides, preserve_partitions=topics.preserve_partitions,
            forward=config.provenance.forward,
        )
        able = config.capabilities
        for warning in able.warnings():
            self.log(warning)
        feed = self._feed() if able.indexed else None
        self.feed = feed
        self.clock.mark("offset index")
        self.kafka4 = flow_helper(config) if feed else None  # share and Streams groups: Kafka 4's admin API
        self.translate_query = self._translation(feed) if feed else None
        self.translate_loop = self.translate_query.translation if self.translate_query else None
        self.clock.mark("translation")
        self.share_sync = ShareGroupSync.of(config, self.clusters, feed.locate, self.kafka4, self.log,
                                            self.metrics.share_groups_not_synced,
                                            on_round=partial(self.metrics.loop_round, "share-groups")) \
            if self.translate_loop and feed else None
        self.poller = CommittedOffsetPoller(self.clusters.source, config.group_filter, config.topic_filter,
                                            log=self.log, positions_from=config.offsets.positions_from,
                                            on_round=partial(self.metrics.loop_round, "poller"),
                                            on_stamped=self.translate_loop.offer,
                                            on_source_groups=self.translate_loop.source_groups,
                                            gone_check_s=min(60.0, config.offsets.gone_after_s / 2),
                                            unlisted_groups=self._streams_groups,
                                            forward_except=self.destination_cluster_id if config.provenance.forward
                                            else None) \
            if self.translate_loop else None
        read_through = self._read_through
        self.lag_sampler = LagSampler(config, self.clusters.source, self.clusters.destination,
                                      feed.next_to_handle if feed else lambda: dict(read_through),
                                      self.metrics, log=self.log)
        self.lag_sampler.prepare()
        self.losses = LossWatch(self.spark, config, self.ledger, self._source_admin, self._dest_admin, self.metrics,
                                self.log, self.feed)
        self.topic_watch = TopicWatch(self.topic_sync, self.metrics, self.losses, self.holds, self.feed,
                                      config.streaming.realtime, self.request_restart, self.log)
        self._subscribe()
        self.connected = True

    def _subscribe(self) -> None:
        """Every part is built: each now hears the parts it follows. The copy's batches reach the
        holds, the lag sampler and the index feed; the feed and the translation follow each other
        (the feed tells the translation the index moved, and asks it where the groups stand), the
        translation tells the poller which positions it forgot, and the metrics ask the translation
        how long each group has waited."""
        self.progress.on_batch = self._on_replicated
        loop, poller, metrics = self.translate_loop, self.poller, self.metrics
        if loop is None:
            return
        metrics.translation_ages = loop.untranslated_ages
        if self.feed is not None:
            self.feed.on_advanced = loop.on_index_advanced
            self.feed.live_positions = partial(live_positions, loop)
        if poller is not None:
            def forgotten(positions: set[tuple[str, str, int]]) -> None:
                """Positions gone from the source: counted, and their records in
                `__consumer_timestamps` deleted by the poller (the source's writer of that topic)."""
                metrics.positions_forgotten(len(positions))
                poller.forget(positions)

            loop.on_forgotten = forgotten

    def close(self) -> None:
        """Releases the clients the translate loop and the feed opened (the poller closes its own),
        and the cluster contexts when they are the flow's own."""
        for part in (self.translate_loop, self.share_sync, self.kafka4):
            if part is not None:
                part.close()
        if self.feed is not None:
            self.feed.close()
        if self._own_clusters:
            self.clusters.close()

    def _feed(self) -> IndexFeed:
        if ensure_runs_topic(self._dest_admin, self.runs_topic):
            self.log(f"topic {self.runs_topic}: created on {self.config.destination.alias} (compacted; runs the "
                     "offset index holds are deleted after a minute, any left after a day)")
        else:
            self._settle(self.runs_topic, self.config.destination.alias,
                         partial(settle_runs_topic, self._dest_admin, self.runs_topic),
                         "it keeps a day of runs until they are set")

        def dest_bounds() -> dict[tuple[str, int], tuple[int, int]]:
            return log_bounds(self._dest_admin, matching_partitions(self._dest_admin, self.config.remote_topic_filter))

        feed = IndexFeed(
            spark=self.spark, index=self.index, destination=self.clusters.destination, runs_topic=self.runs_topic,
            source_cluster_id=self.source_cluster_id, header=self.config.provenance.header,
            renamer=self.config.renamer, dest_bounds=dest_bounds, log=self.log, prefetched=self.index_prefetch,
            scan_timeout_s=self.config.streaming.resume_scan_timeout_s,
            store=RunStore(life_starts=self.ledger.life_starts(self.config.renamer.format_remote_topic),
                           rewinds=self.ledger.rewinds(self.config.renamer.format_remote_topic)),
            on_runs=self.metrics.runs_published,
            on_upkeep=partial(self.metrics.loop_round, "offset-index-upkeep"),
            trim=runs_trim(self._dest_admin, self.runs_topic, self.config.destination, self.log),
            dest_topics=lambda: partition_counts(self._dest_admin), on_kept=self._keep_ledger,
        )
        feed.load()
        return feed

    def _keep_ledger(self, held_from: Mapping[tuple[str, int], int], starts: Mapping[tuple[str, int], int],
                     topics: set[str]) -> None:
        """The ledger of losses and the holds table keep what still matters (`losses.outlived`,
        `holds.outlived_events`); what leaves is said."""
        kept_s = max(KEPT_S, self.config.drill.losses_since_s)
        dropped = self.ledger.keep(dt.datetime.now(dt.UTC), held_from, starts, topics,
                                   self.config.renamer.format_remote_topic, kept_s)
        if dropped:
            self.log(f"losses: {len(dropped)} entries older than {kept_s / 86400:g} days left {self.ledger.path}: "
                     "the destination holds nothing they still matter to")
        events = self.holds.table.keep(dt.datetime.now(dt.UTC), kept_s)
        if events:
            self.log(f"holds: {len(events)} events older than {kept_s / 86400:g} days left {self.holds.table.path}: "
                     "each partition keeps its newest")

    def _record_release(self, record: RecordedClusters) -> None:
        """The running release recorded in the state when it is not the newest there (a first start,
        an upgrade), so the state says which release wrote it last."""
        if record.releases is None:
            return
        earlier = record.releases.newest()
        now = record.releases.record(self.appends)
        if now is not None:
            was = f" (it was dr-stream {earlier.version}, state format {earlier.state_format})" if earlier else ""
            self.log(f"state under {self.config.streaming.checkpoint_dir} is written by dr-stream {now.version}, "
                     f"state format {now.state_format}, from now on{was}: recorded in {record.releases.path}")

    def _acls_synced(self, done: AclPass) -> None:
        self.metrics.acls_synced(len(done.created), len(done.removed), done.left_out())

    def _on_replicated(self, batch: BatchRead) -> None:
        ends = batch.ends
        if self._held:  # a held partition's batches read past its refused record without copying it
            ends = clamped(ends, self._held)
            batch = batch.without(self._held)
        self._read_through.update(ends)  # without an index, the lag sampler's next offsets
        self.holds.batch_committed(ends)
        self.lag_sampler.batch_read(batch.log_ends)
        if self.feed is not None:
            self.feed.replicated(ends, (batch.starts, batch.ends) if batch.may_have_gaps else None)

    def _on_cost(self, batch: BatchCost) -> None:
        widening = None if self.config.streaming.realtime else self.trigger.batch_done(batch)
        if widening:
            self.log(widening.shown())
            if widening.widened:
                self.request_restart(f"trigger {seconds(widening.from_ms)} -> {seconds(widening.to_ms)}")

    def _translation(self, feed: IndexFeed) -> TranslateQuery | None:
        config = self.config
        if not config.capabilities.translating:
            return None
        if ensure_consumer_timestamps(self._source_admin):
            self.log(f"topic {CONSUMER_TIMESTAMPS_TOPIC}: created on {config.source.alias} (compacted)")
        else:
            self._settle(CONSUMER_TIMESTAMPS_TOPIC, config.source.alias,
                         partial(settle_consumer_timestamps, self._source_admin),
                         "it keeps every record of a segment until the broker rolls it")
        query = TranslateQuery.of(self.spark, config, self.clusters, feed.locate, self.destination_cluster_id, self.log,
                                  origin=self.source_cluster_id, kafka4=self.kafka4, appends=self.appends,
                                  on_synced=self.metrics.groups_synced,
                                  on_round=partial(self.metrics.loop_round, "translate"),
                                  on_upkeep=partial(self.metrics.loop_round, "translation-log-upkeep"),
                                  on_unconfirmed=self.metrics.provenance_unconfirmed,
                                  on_unbacked=self.metrics.positions_unbacked,
                                  on_unbacked_dropped=self.metrics.positions_unbacked_dropped)
        query.resume()
        return query

    def _settle(self, topic: str, cluster: str, settle: Callable[[], dict[str, str]], until: str) -> None:
        """A topic of the flow's that an older release made gets this one's configs (`settle`); a
        refusal is said, with what holds `until` they are set, and the flow goes on."""
        try:
            changed = settle()
        except Exception as exc:
            self.log(f"topic {topic}: configs not updated on {cluster} ({first_line(exc)}); {until}")
            return
        if changed:
            shown = ", ".join(f"{k}={v}" for k, v in sorted(changed.items()))
            self.log(f"topic {topic}: configs updated on {cluster} ({shown})")

    def _streams_groups(self) -> list[str]:
        """The source's Kafka Streams groups where the poller's reader does not list them (the
        admin path's consumer-group listing): groups that exist, never taken as gone."""
        config = self.config
        if config.offsets.positions_from != "admin" or not config.offsets.streams_groups or self.kafka4 is None:
            return []
        return sorted(StreamsGroupStates(self.kafka4, config.source).listed())

    def queries(self) -> list[tuple[str, Callable[[], StreamingQuery]]]:
        out = [(self.config.replicate_query, in_pool(self.spark, "replicate", self.start))]
        if self.translate_query is not None:
            out.append((self.config.translate_query, self.translate_query.start))
        return out

    def workers(self) -> list[Worker]:
        """The flow's driver threads by name: each runs until the event it is given is set."""
        out: list[Worker] = [("topics", self.topic_watch.run), ("lag", self.lag_sampler.run)]
        for name, part in (("index-feed", self.feed), ("translate", self.translate_loop), ("poller", self.poller),
                           ("acls", self.acl_sync), ("share-groups", self.share_sync)):
            if part is not None:
                out.append((name, part.run))
        return out

    def start(self) -> StreamingQuery:
        """Starts the replicate query, its topics on the destination first.

        Both modes run the same plan: Spark's Kafka source, the record path, the crash-resume
        filter fixed at this start, dr-stream's sink. Only the trigger differs. Says how long
        the start took, phase by phase."""
        if self._launches:
            self.clock = PhaseClock()
        self._launches += 1
        self.connect()
        self.trigger.restarted()
        query = self._start_query()
        self.clock.mark("query start")
        what = "query restart" if self._launches > 1 else "start-up"
        self.log(f"{what}: replicate query running after {self.clock.shown()}")
        return query

    def _resume_marks(self, replicated: dict[str, int]) -> dict[tuple[str, int], list[tuple[int, int]]]:
        """Fixes this start's resume filter: the last copy of each partition (`resume`), the
        partitions held at a refused record (`holds`), the records a failed write left out below
        the last copy, and what the source lost since (`loss_watch`); returns the ranges copied past
        a gap, which the filter skips."""
        config = self.config
        if config.capabilities.exactly_once and self.feed:
            self._marks, self._left_out, rewound = marks_at_start(self.feed, config, self._source_admin,
                                                                  self.destination_cluster_id, replicated, self.log,
                                                                  self.clock.mark)
        else:
            self._marks, rewound = {}, {}
        holding = self.holds.at_start()
        self._held = {k: o for k, o in holding.held_from().items() if k[0] in replicated}
        self._marks, copied, starts = self.holds.reread(self._marks, holding,
                                                        self.feed.copied_from if self.feed else None)
        if self.feed:
            self._marks, copied = unwritten_at_start(self.spark, config.replicate_checkpoint, self.feed,
                                                     self._marks, self._left_out, copied, starts, self.log,
                                                     self.metrics.partitions_reread)
        resume_at = {k: o for k, o in starts.items() if k in holding.released() and k[0] in replicated}
        self._marks = self.losses.at_start(replicated, self._marks, {k: starts[k] for k in self._held}, resume_at,
                                           rewound)
        return copied

    def _start_query(self) -> StreamingQuery:
        replicated = self.topic_watch.sync()
        # the largest max.message.bytes a replicated topic allows: the sink is sized for it
        message_bytes = self.topic_sync.largest_message_bytes
        self.clock.mark("topics")
        config = self.config
        if config.streaming.realtime:
            self.log(require_slots(dict(self.spark.sparkContext.getConf().getAll()), sum(replicated.values()),
                                   config.path))
        copied = self._resume_marks(replicated)
        self.topic_watch.started(replicated, message_bytes, self._marks)
        self.clock.mark("resume marks, losses")
        source = self.spark.readStream.format("kafka").options(
            **self.losses.source_options(spark_options.replicate_source(config, sorted(replicated)))).load()
        if not config.streaming.realtime:
            # A task per core, not per source partition: a task's scheduling, producer flush, commit
            # message and run publications cost more than a small batch's writes. Order within a
            # partition is kept. Real-time mode needs a task per partition.
            source = source.coalesce(max(1, self.spark.sparkContext.defaultParallelism))
        resume, counts = Resume(self._marks, self._left_out, self._held, copied), self.progress.new_counts(self.spark)
        confirm = ((written_copies(spark_options.java_client(config.source)),
                    destination_originals(spark_options.java_client(config.destination)))
                   if self.plan.provenance_enabled else None)
        stream = source.transform(prepare(self.plan, resume, counts, confirm))
        checkpoint = config.replicate_checkpoint
        dropped = drop_unfinished_writes(self.spark, checkpoint)
        if dropped:
            self.log(f"checkpoint {checkpoint}: removed {len(dropped)} files a stopped run left half-written "
                     f"({', '.join(dropped)}); no batch had completed, so the query starts as new and the resume "
                     "marks skip what was copied")
        writer = (
            stream.writeStream.queryName(config.replicate_query).format(COPY_SINK)
            .options(**spark_options.sink(config.destination, self.plan.renamer, self.plan.preserve_partitions,
                                          self.runs_topic if self.feed else None, self.plan.header, message_bytes,
                                          self.plan.provenance_cluster()))
            .option("checkpointLocation", checkpoint)
        )
        if config.streaming.realtime:
            # Real-time mode emits each record as it arrives: Spark calls that the update mode.
            # (pyspark's type stubs do not know Spark 4.1's `realTime` trigger yet)
            return writer.outputMode("update").trigger(  # type: ignore[call-overload,no-any-return]
                realTime=config.streaming.trigger_interval).start()
        self.metrics.trigger_set(self.trigger.trigger_ms)
        return (
            writer.trigger(processingTime=self.trigger.interval)
            # Offsets and commits are logged beside the batches instead of before and after each:
            # two file writes less per batch. A crash then replays more, which the resume filter
            # drops (the sink is at-least-once either way).
            .option("asyncProgressTrackingEnabled", "true")
            # Spark lets only its own Kafka sink track progress this way unless told: dr-stream's sink
            # is at least once as that one is, and its restart filter is what drops the replay.
            .option("_asyncProgressTrackingOverrideSinkSupportCheck", "true")
            .start()
        )

    def request_restart(self, reason: str) -> None:
        if not self._restart_reason:
            self.log(f"replicate query restarts: {reason}")
            self._restart_reason = reason

    def take_restart_request(self) -> str | None:
        reason, self._restart_reason = self._restart_reason, None
        return reason
