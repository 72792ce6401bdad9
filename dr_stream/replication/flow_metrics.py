"""The numbers a running flow exposes on `/metrics`, and what `/healthz` judges.

Each part of the flow tells this object what it saw, through one method per kind of event: the
sink's published runs (records copied, replication latency), Spark's batch progress (records
skipped, by reason), the lag sampler (lag per partition, clusters that do not answer), the
supervisor (queries started, restarted, active; driver threads that failed) and the translate
loop (groups synced). A scrape turns the state into Prometheus families (`collect`), so a
metric costs nothing between scrapes.

Invariants: counters start at 0 when the process starts and only grow; runs published by an
earlier run of the flow (acknowledged before this process started) are not counted as copied;
every method is safe to call from any thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from dr_stream.core.lag import PartitionLag
from dr_stream.index import Run
from dr_stream.kafka.waits import WAITS
from dr_stream.positions import CommitBacking, Synced
from dr_stream.replication.copy_latency import SpreadHistogram, newly_copied
from dr_stream.replication.health import Health, QueryState, judge

SKIP_REASONS = ("came_from_destination", "came_from_destination_unchecked", "malformed_provenance", "left_out",
                "already_copied")


def action_label(action: Synced) -> str:
    """A group sync's action as a metric label: a few fixed words, never the free text."""
    return action.outcome.label if action.outcome else "other"


class FlowMetrics(Collector):
    def __init__(self, flow: str, replicate_query: str, clusters: tuple[str, ...] = (),
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 translation_ages: Callable[[], dict[str, float]] = dict,
                 retried: Callable[[], Mapping[tuple[str, str], int]] = WAITS.totals) -> None:
        """`translation_ages`: each group's wait for its translation, asked at each scrape;
        `retried`: requests sent again while a cluster settled, per (cluster, error), likewise."""
        self.flow, self.replicate_query, self.clusters = flow, replicate_query, clusters
        self.clock, self.started_ms = clock, wall() * 1000
        self.translation_ages = translation_ages
        self.retried = retried
        self._lock = threading.Lock()
        self._copied: dict[str, int] = {}
        self._skipped = dict.fromkeys(SKIP_REASONS, 0)
        self._latency = SpreadHistogram()
        self._last_run: dict[tuple[str, int], Run] = {}
        self._lags: list[PartitionLag] = []
        self._unreachable: list[str] = []
        self._probed = False
        self._sampled_at: float | None = None
        self._synced: dict[str, int] = {}
        self._share_unsynced: dict[str, int] = {}
        self._reread = 0
        self._forgotten = 0
        self._spark_appends: dict[str, int] = {}
        self._active: dict[str, bool] = {}
        self._restarts: dict[str, int] = {}
        self._progressed: dict[str, float] = {}
        self._thread_failures: dict[str, int] = {}
        self._lost: dict[tuple[str, str], int] = {}
        self._held = 0
        # ACL sync: ACLs created and removed on the destination, and the last pass's source ACLs
        # not copied as they are, by how (narrowed, unmappable, refused); None: no pass yet
        self._acls_changed = {"created": 0, "removed": 0}
        self._acls_left_out: dict[str, int] | None = None
        self._unconfirmed: dict[str, int] = {}
        self._unbacked = 0
        self._unbacked_dropped = 0
        self._unreturned_starts: dict[str, int] = {}
        # control loop -> its last round: (seconds, items it covered, period its pace set)
        self._rounds: dict[str, tuple[float, int, float]] = {}
        self._trigger_s: dict[str, float] = {}
        # the last periodic drill: (ready, failed checks per area, wall time); None: none ran yet
        self._drill: tuple[bool, dict[str, int], float] | None = None

    # -- what the flow's parts report -----------------------------------------------------------

    def runs_published(self, runs: Iterable[Run]) -> None:
        """Runs read from the runs topic (each version of a growing run, in publication order)."""
        with self._lock:
            for run in runs:
                where = (run.dest_topic, run.dest_partition)
                last = self._last_run.get(where)
                span = newly_copied(last, run)
                if last is None or run.dest_end >= last.dest_end:
                    self._last_run[where] = run
                if span is None or (run.copied_at or 0) < self.started_ms:
                    continue
                self._copied[span.topic] = self._copied.get(span.topic, 0) + span.records
                self._latency.add(span.records, span.low_s, span.high_s)
                self._progressed[self.replicate_query] = self.clock()

    def batch_done(self, query: str, skipped: dict[str, int], copied: dict[str, int] | None = None) -> None:
        """A completed micro-batch (or a trigger that found nothing new): `copied` only for a flow
        without provenance, whose copies publish no runs."""
        with self._lock:
            for reason, count in skipped.items():
                if reason in SKIP_REASONS:
                    self._skipped[reason] += count
            for topic, count in (copied or {}).items():
                self._copied[topic] = self._copied.get(topic, 0) + count
            self._progressed[query] = self.clock()

    def query_started(self, query: str, restart: bool) -> None:
        with self._lock:
            self._active[query] = True
            self._progressed[query] = self.clock()
            if restart:
                self._restarts[query] = self._restarts.get(query, 0) + 1
            self._restarts.setdefault(query, 0)

    def start_unreturned(self, query: str) -> None:
        """A start of the query had not returned when the supervisor stopped waiting for it."""
        with self._lock:
            self._unreturned_starts[query] = self._unreturned_starts.get(query, 0) + 1

    def query_active(self, query: str, active: bool) -> None:
        with self._lock:
            self._active[query] = active

    def thread_failed(self, thread: str) -> None:
        """A driver thread's loop ended on an error (the supervisor starts it again)."""
        with self._lock:
            self._thread_failures[thread] = self._thread_failures.get(thread, 0) + 1

    def records_lost(self, topic: str, cause: str, records: int) -> None:
        """Records the flow recorded as lost (`losses`); a loss of unknown size shows its series at 0."""
        with self._lock:
            self._lost[(topic, cause)] = self._lost.get((topic, cause), 0) + max(records, 0)

    def lag_sampled(self, lags: list[PartitionLag], unreachable: list[str]) -> None:
        with self._lock:
            self._lags, self._unreachable, self._probed = list(lags), list(unreachable), True
            self._sampled_at = self.clock()
            if not unreachable and lags and all(g.lag_records == 0 for g in lags):
                self._progressed[self.replicate_query] = self.clock()  # nothing to copy is no stall

    def groups_synced(self, actions: Iterable[Synced]) -> None:
        with self._lock:
            for action in actions:
                label = action_label(action)
                self._synced[label] = self._synced.get(label, 0) + 1

    def loop_round(self, loop: str, seconds: float, items: int, period_s: float) -> None:
        """A control loop's round: how long it took, how many items (groups, topics, partitions)
        it covered, and the period its pace set from it (`LoopPace`)."""
        with self._lock:
            self._rounds[loop] = (seconds, items, period_s)

    def partitions_reread(self, partitions: int) -> None:
        """Source partitions a query start read again from below their last copy, because records
        there were not on the destination (`resume.unwritten_below`)."""
        if partitions:
            with self._lock:
                self._reread += partitions

    def positions_forgotten(self, positions: int) -> None:
        """Group positions the flow forgot, gone from the source (`positions.gone_positions`)."""
        with self._lock:
            self._forgotten += positions

    def appended_through_spark(self, table: str) -> None:
        """An append to the Delta table at `table` that went through Spark: the driver could not
        write it (`runtime.delta_appends`)."""
        with self._lock:
            self._spark_appends[table] = self._spark_appends.get(table, 0) + 1

    def share_groups_not_synced(self, what: str, groups: int) -> None:
        """Share groups whose `what` (`offsets`, `settings`) a round did not make as on the source:
        failed, or skipped while the group runs on the destination."""
        if groups:
            with self._lock:
                self._share_unsynced[what] = self._share_unsynced.get(what, 0) + groups

    def acls_synced(self, created: int, removed: int, left_out: Mapping[str, int]) -> None:
        """An ACL sync pass: the ACLs it created and removed on the destination, and the source
        ACLs it did not copy as they are, by how (`narrowed`, `unmappable`, `refused`)."""
        with self._lock:
            self._acls_changed["created"] += created
            self._acls_changed["removed"] += removed
            self._acls_left_out = {how: left_out.get(how, 0) for how in ("narrowed", "unmappable", "refused")}

    def provenance_unconfirmed(self, topic: str, records: int = 1) -> None:
        """Provenance claims of records of source topic `topic` that nothing confirmed: a position
        claim the destination's record did not (`positions.returned_records`), or a cycle claim no
        run on the source did (`record_path.prepare`, the record was copied). Not taken: forged or
        stale headers."""
        with self._lock:
            self._unconfirmed[topic] = self._unconfirmed.get(topic, 0) + records

    def positions_unbacked(self, positions: int) -> None:
        """Positions of `__consumer_timestamps` no source commit backed within the grace
        (`positions.commit_backing`): held, not translated, a forged or stale record."""
        with self._lock:
            self._unbacked += positions

    def positions_unbacked_dropped(self, positions: int) -> None:
        """Unbacked positions dropped from the hold: their group held no offset on their
        partition, or none backed them before they expired (`CommitBacking.expire_s`)."""
        with self._lock:
            self._unbacked_dropped += positions

    def partitions_held(self, held: int) -> None:
        """Partitions held now at a record the destination refused (`holds`)."""
        with self._lock:
            self._held = held

    def trigger_set(self, ms: int) -> None:
        """The replicate query starts with this micro-batch trigger."""
        with self._lock:
            self._trigger_s[self.replicate_query] = ms / 1000

    # -- what is asked of it --------------------------------------------------------------------

    def lag_records(self) -> int | None:
        """Records behind over all partitions at the last sample (None before the first)."""
        with self._lock:
            known = [g.lag_records for g in self._lags if g.lag_records is not None]
            return sum(known) if known else None

    def lag_shown(self) -> str:
        """The last sample's lag for a console line: '120 records (0.4 s ago)'."""
        lag = self.lag_records()
        if lag is None or self._sampled_at is None:
            return "lag not measured yet"
        return f"lag {lag} records ({self.clock() - self._sampled_at:.1f} s ago)"

    def loops_shown(self) -> str:
        """'poller 0.21 s/5000 every 0.71 s, topics ...': each loop's last round, what it covered
        and its period, for the progress line."""
        with self._lock:
            rounds = sorted(self._rounds.items())
        return ", ".join(f"{loop} {s:.2f} s/{n} every {p:.2f} s" for loop, (s, n, p) in rounds)

    def drilled(self, ready: bool, failures: dict[str, int], at: float | None = None) -> None:
        """The verdict of the flow's periodic readiness drill; `failures`: failed checks per area."""
        with self._lock:
            self._drill = (ready, dict(failures), time.time() if at is None else at)

    def health(self, window_s: float) -> Health:
        with self._lock:
            queries = [QueryState(q, active, self._progressed.get(q)) for q, active in sorted(self._active.items())]
            return judge(self.clock(), queries, self._unreachable, window_s)

    def collect(self) -> Iterator[Metric]:
        """prometheus_client's collector protocol: the families as of now."""
        with self._lock:
            yield from self._counters()
            yield from self._gauges()
            yield self._histogram()
        yield self._family(GaugeMetricFamily, "dr_stream_translation_age_seconds",
                           "Seconds a group's newest commit has waited for translation (0: none waits)", "group",
                           self.translation_ages())
        retried = CounterMetricFamily("dr_stream_kafka_requests_retried", "Requests of dr-stream's own clients sent "
                                      "again because a cluster answered a retriable error (a broker restarting, "
                                      "leadership moving), by cluster and error, in this process",
                                      labels=["flow", "cluster", "error"])
        for (cluster, error), count in sorted(self.retried().items()):
            retried.add_metric([self.flow, cluster, error], count)
        yield retried

    def _family(self, kind: type[CounterMetricFamily] | type[GaugeMetricFamily], name: str, doc: str, label: str,
                values: Mapping[str, float]) -> Metric:
        """One family of this flow's series, a series per `label` value."""
        family = kind(name, doc, labels=["flow", label])
        for key, value in sorted(values.items()):
            family.add_metric([self.flow, key], value)
        return family

    def _counters(self) -> list[Metric]:
        lost = CounterMetricFamily("dr_stream_records_lost", "Source records the flow can no longer copy, by cause "
                                   "(retention, topic-recreated, offsets-rewound, refused; see `dr-stream losses`)",
                                   labels=["flow", "topic", "cause"])
        for (topic, cause), records in sorted(self._lost.items()):
            lost.add_metric([self.flow, topic, cause], records)
        reread = CounterMetricFamily("dr_stream_partitions_reread", "Source partitions a query start read again "
                                     "from below their last copy: offsets there had no copy (a write failed while "
                                     "later ones went on, or the query filters them out: transaction markers, "
                                     "cycles)", labels=["flow"])
        reread.add_metric([self.flow], self._reread)
        forgotten = CounterMetricFamily("dr_stream_positions_forgotten", "Group positions the flow forgot (driver "
                                        "state, metric series, translation log rows) after the source held no "
                                        "committed offset for them for `offsets.gone_after`: groups deleted or "
                                        "expired, topics deleted", labels=["flow"])
        forgotten.add_metric([self.flow], self._forgotten)
        grace, expire_h = CommitBacking.grace_s, CommitBacking.expire_s / 3600
        unbacked = CounterMetricFamily("dr_stream_positions_unbacked", "Positions read from __consumer_timestamps "
                                       f"that no commit on the source reached within {grace:g} s: held, not "
                                       "translated (a forged or stale record, or a group the flow may not describe); "
                                       "taken once the group commits there", labels=["flow"])
        unbacked.add_metric([self.flow], self._unbacked)
        dropped = CounterMetricFamily("dr_stream_positions_unbacked_dropped", "Unbacked positions dropped unread: "
                                      "their group held no committed offset on their partition on the source, or "
                                      f"no commit backed them within {expire_h:g} h", labels=["flow"])
        dropped.add_metric([self.flow], self._unbacked_dropped)
        return [
            lost,
            reread,
            forgotten,
            unbacked,
            dropped,
            self._family(CounterMetricFamily, "dr_stream_records_copied", "Records the destination acknowledged, per "
                         "source topic, since the process started (from the runs the sink publishes)", "topic",
                         self._copied),
            self._family(CounterMetricFamily, "dr_stream_records_skipped", "Records read and not copied, by "
                         "reason: came_from_destination (loop prevention: a run of a flow on the source holds the "
                         "record as the copy its header names), came_from_destination_unchecked (taken on its header: "
                         "the source's runs could not be read), left_out (at failback), already_copied "
                         "(replayed after a crash, dropped by the resume filter); malformed_provenance counts records "
                         "copied whose provenance header did not parse", "reason", self._skipped),
            self._family(CounterMetricFamily, "dr_stream_groups_synced", "Group positions written to (or judged for) "
                         "the destination, by outcome: committed, unchanged, skipped_active, skipped_ahead, "
                         "not_translated, failed, rewound", "action", self._synced),
            self._family(CounterMetricFamily, "dr_stream_share_groups_not_synced", "Share groups a round left unlike "
                         "the source on the destination (failed, or skipped while the group runs there), by what: "
                         "offsets, settings", "what", self._share_unsynced),
            self._family(CounterMetricFamily, "dr_stream_delta_appends_through_spark", "Appends to a Delta table "
                         "of the flow that went through a Spark job: the driver could not write the table",
                         "table", self._spark_appends),
            self._family(CounterMetricFamily, "dr_stream_query_restarts", "Restarts of a query after a failure, a "
                         "topology change or a wider trigger", "query", self._restarts),
            self._family(CounterMetricFamily, "dr_stream_thread_failures", "Driver threads whose loop ended on an "
                         "error and was started again 5 s later (topics, lag, index-feed, translate, poller, acls, "
                         "share-groups)", "thread", self._thread_failures),
            self._family(CounterMetricFamily, "dr_stream_provenance_unconfirmed", "Provenance claims of source "
                         "records nothing confirmed, by source topic: a claim to be a copy of the destination's record "
                         "at an offset that the record there does not bear out (it moved no position), or a claim to "
                         "have come from the destination that no run of a flow on the source holds (the record was "
                         "copied)",
                         "topic", self._unconfirmed),
            self._family(CounterMetricFamily, "dr_stream_acls_changed", "ACLs the ACL sync created on or removed "
                         "from the destination, by change: created, removed", "change", self._acls_changed),
            self._family(CounterMetricFamily, "dr_stream_query_starts_unreturned", "Starts of a query not returned "
                         "when the supervisor stopped waiting (it then supervises the query Spark runs under that "
                         "name)", "query", self._unreturned_starts),
        ]

    def _gauges(self) -> list[Metric]:
        records = GaugeMetricFamily("dr_stream_lag_records", "Records of a source partition not copied yet",
                                    labels=["flow", "topic", "partition"])
        seconds = GaugeMetricFamily("dr_stream_lag_seconds", "Age of the oldest record of a source partition "
                                    "not copied yet (0: none waits): what a disaster now would lose",
                                    labels=["flow", "topic", "partition"])
        for g in self._lags:
            where = [self.flow, g.topic, str(g.partition)]
            if g.lag_records is not None:
                records.add_metric(where, g.lag_records)
            if g.lag_seconds is not None:
                seconds.add_metric(where, g.lag_seconds)
        active = self._family(GaugeMetricFamily, "dr_stream_query_active", "1 while the query runs", "query",
                              {query: 1.0 if on else 0.0 for query, on in self._active.items()})
        up = GaugeMetricFamily("dr_stream_cluster_up", "1 when the cluster answered the last probe",
                               labels=["flow", "cluster"])
        for alias in self.clusters if self._probed else ():
            up.add_metric([self.flow, alias], 0.0 if alias in self._unreachable else 1.0)
        rounds = self._rounds
        loops = [
            self._family(GaugeMetricFamily, "dr_stream_loop_round_seconds", "Duration of a control loop's last round",
                         "loop", {k: r[0] for k, r in rounds.items()}),
            self._family(GaugeMetricFamily, "dr_stream_loop_round_items", "Groups, topics or partitions a control "
                         "loop's last round covered", "loop", {k: float(r[1]) for k, r in rounds.items()}),
            self._family(GaugeMetricFamily, "dr_stream_loop_period_seconds", "Time from the start of a control "
                         "loop's last round to the start of its next (at least twice the round for the paced loops: "
                         "poller, topics, lag)", "loop",
                         {k: r[2] for k, r in rounds.items()}),
        ]
        trigger = self._family(GaugeMetricFamily, "dr_stream_trigger_seconds", "The micro-batch trigger the query "
                               "runs with (wider than configured once batches' cost per partition set the pace)",
                               "query", self._trigger_s)
        held = GaugeMetricFamily("dr_stream_partitions_held", "Source partitions held at a record the destination "
                                 "refused, waiting for `dr-stream skip` (every other partition goes on)",
                                 labels=["flow"])
        held.add_metric([self.flow], float(self._held))
        acls = [] if self._acls_left_out is None else [  # no series without ACL sync
            self._family(GaugeMetricFamily, "dr_stream_acls_not_copied", "Source ACLs the last ACL sync pass did "
                         "not copy as they are, by how: narrowed (a wildcard or prefix granted on the copies only), "
                         "unmappable (no setting brings it over: grant by hand), refused (a DENY of the flow's own "
                         "principal)", "how", {k: float(v) for k, v in self._acls_left_out.items()})]
        return [records, seconds, active, up, trigger, held, *acls, *loops, *self._drill_gauges()]

    def _drill_gauges(self) -> list[Metric]:
        if self._drill is None:  # no series until a drill ran: "not ready" would be a false alarm
            return []
        ready, failures, at = self._drill
        return [
            self._family(GaugeMetricFamily, "dr_stream_drill_ready", "1 when the flow's last readiness drill found "
                         "it ready for failover", "result", {"last": 1.0 if ready else 0.0}),
            self._family(GaugeMetricFamily, "dr_stream_drill_failures", "Checks the last readiness drill failed, by "
                         "area (topics, lag, translation, failover, flow, clusters)", "check",
                         {area: float(n) for area, n in failures.items()}),
            self._family(GaugeMetricFamily, "dr_stream_drill_timestamp_seconds", "When the last readiness drill "
                         "ran (Unix time)", "result", {"last": at}),
        ]

    def _histogram(self) -> Metric:
        family = HistogramMetricFamily("dr_stream_replication_latency_seconds",
                                       "When the destination acknowledged a record minus its timestamp "
                                       "(buckets 5 ms .. 1 h)",
                                       labels=["flow"])
        family.add_metric([self.flow], self._latency.buckets(), self._latency.sum)
        return family
