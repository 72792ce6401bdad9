"""A driver thread of the flow that measures lag and probes both clusters.

Lag comes from the source's log ends and the next origin offset the flow has to handle (the
offset index, plus batches that skipped every record); the age of the oldest waiting record
from one read of all lagging partitions, repeated only for partitions whose oldest waiting
record changed.

Two kinds of sample, so what a sample costs follows what moved rather than the clock:

- a *full* sample every `metrics.sample_interval`: both clusters probed (the source's metadata
  request is its probe), every replicated partition's log start and end asked of the source.
  Spark's progress cannot stand in for it: it says nothing while a batch is stuck (a destination
  that is away) and, in real-time mode, reports once per batch, minutes apart;
- between them, soon after each committed batch (at most one a second, and never sooner after
  the last than that one took: `LoopPace`), a sample from the log ends that batch itself saw
  (Spark's `latestOffset`, `batch_read`): no request at all, but a timestamp read for a partition
  whose oldest waiting record changed. A partition no full sample listed yet waits for the next.

Each sample goes to the metrics and to the lag history topic.

Invariant: a cluster that does not answer is reported and sampling goes on; the thread closes
every client it opened when it stops. A producer whose samples stay queued while the
destination answers is replaced, and that is said (`StuckQueue`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from confluent_kafka import KafkaException, Producer

from dr_stream.core.config import FlowConfig
from dr_stream.core.contracts import lag_topic
from dr_stream.core.lag import Partition, PartitionLag, first_waiting, partition_lags
from dr_stream.failure_notes import first_line, summarised
from dr_stream.kafka.admin import answers, log_bounds, matching_partitions
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.loop_pace import LoopPace
from dr_stream.positions import RecordTimestamps
from dr_stream.replication.flow_metrics import FlowMetrics
from dr_stream.replication.lag_history import encode, ensure_lag_topic, sample_of

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message



@dataclass
class StuckQueue:
    """Decides when a producer no longer delivers: samples still queued at every round for
    `limit_s` while the destination answered all along. The clock starts again whenever the
    queue empties or the destination is away (a producer reconnecting after an outage waits out
    a back-off of up to 10 s before it sends)."""

    limit_s: float = 20.0
    _since: float | None = None

    def stuck(self, queued: int, answering: bool, now: float) -> bool:
        if not queued or not answering:
            self._since = None
            return False
        if self._since is None:
            self._since = now
        if now - self._since < self.limit_s:
            return False
        self._since = None
        return True


def moved_bounds(bounds: Mapping[Partition, tuple[int, int]],
                 log_ends: Mapping[Partition, int]) -> dict[Partition, tuple[int, int]]:
    """Each known partition's (log start, log end) with its end moved up to what a batch saw since
    (never down: a batch planned before the last full sample saw less); a partition the bounds do
    not know is left for the next full sample, whose log start it needs."""
    return {key: (start, max(end, log_ends.get(key, end))) for key, (start, end) in bounds.items()}


@dataclass
class LagSampler:
    config: FlowConfig
    source: ClusterContext
    destination: ClusterContext
    # the next origin offset the flow has to handle, per source partition
    next_offsets: Callable[[], dict[Partition, int]]
    metrics: FlowMetrics
    log: Callable[[str], None] = print
    # a sample at most this often, however many batches commit
    min_spacing_s: float = 1.0
    # a producer holding samples this long while the destination answers is replaced
    stuck_after_s: float = 20.0
    _stamps: dict[Partition, tuple[int, int]] = field(default_factory=dict)  # partition -> (offset, timestamp)
    _down: list[str] = field(default_factory=list)
    _wake: threading.Event = field(default_factory=threading.Event)
    _undelivered: str = ""
    # each partition's (log start, log end) as last known: a full sample's, then the batches' ends
    _bounds: dict[Partition, tuple[int, int]] = field(default_factory=dict)
    # log ends committed batches saw since the last sample, guarded by `_seen_lock`
    _seen: dict[Partition, int] = field(default_factory=dict)
    _seen_lock: threading.Lock = field(default_factory=threading.Lock)

    def prepare(self) -> None:
        """Creates the lag history topic at start-up, where the destination has to answer anyway:
        on the sampling thread a slow creation would hold back the clusters' next probe."""
        ensure_lag_topic(self.destination.admin, lag_topic(self.config.name))

    def batch_read(self, log_ends: Mapping[Partition, int]) -> None:
        """A batch committed, having seen these log ends of the source (Spark's `latestOffset`):
        a sample soon, from them."""
        with self._seen_lock:
            self._seen.update(log_ends)
        self._wake.set()

    def sample(self, stamps: RecordTimestamps) -> list[PartitionLag]:
        # The ends batches saw before this sample's requests are no newer than its answers; those
        # that arrive while it waits may be, and stay for the next sample between full ones.
        with self._seen_lock:
            self._seen.clear()
        timeout = min(3.0, self.config.metrics.sample_interval_s)
        try:  # the source's metadata request is its probe too
            partitions = matching_partitions(self.source.admin, self.config.topic_filter, timeout)
        except KafkaException:
            partitions = None
        down = [alias for alias, answered in ((self.config.source.alias, partitions is not None),
                                              (self.config.destination.alias, answers(self.destination.admin, timeout)))
                if not answered]
        if down != self._down:
            self.log(f"clusters not answering: {', '.join(down)}" if down else "both clusters answer again")
            self._down = down
        self._bounds = log_bounds(self.source.admin, partitions, timeout) if partitions is not None else {}
        return self._lags(stamps)

    def sample_moved(self, stamps: RecordTimestamps) -> list[PartitionLag]:
        """A sample between full ones: the last known bounds moved to the log ends the batches saw
        since (`moved_bounds`), asking the source for no offset."""
        with self._seen_lock:
            seen, self._seen = self._seen, {}
        self._bounds = moved_bounds(self._bounds, seen)
        return self._lags(stamps)

    def _lags(self, stamps: RecordTimestamps) -> list[PartitionLag]:
        nxt = self.next_offsets()
        lags = partition_lags(self._bounds, nxt, self._timestamps(stamps, first_waiting(self._bounds, nxt)),
                              time.time() * 1000)
        self.metrics.lag_sampled(lags, self._down)
        return lags

    def _delivered(self, error: KafkaError | None, _message: Message) -> None:
        """A sample the destination did not take is said, once per distinct error."""
        if error is not None and str(error) != self._undelivered:
            self._undelivered = str(error)
            self.log(f"lag history: a sample was not written to {lag_topic(self.config.name)}: {error}")

    def _timestamps(self, stamps: RecordTimestamps, waiting: dict[Partition, int]) -> dict[Partition, int]:
        wanted = {k: o for k, o in waiting.items() if self._stamps.get(k, (None,))[0] != o}
        for key, ts in (stamps.of_records(wanted, timeout=1.0) if wanted else {}).items():
            self._stamps[key] = (wanted[key], ts)
        self._stamps = {k: v for k, v in self._stamps.items() if k in waiting}
        return {k: ts for k, (o, ts) in self._stamps.items() if waiting.get(k) == o}

    def _producer(self) -> Producer:
        return self.destination.producer({"linger.ms": 100})

    def _reopened(self, producer: Producer, topic: str, waited_s: float) -> Producer:
        dropped = len(producer)
        producer.purge()
        producer.close()
        self.log(f"lag history: {dropped} samples waited {waited_s:.0f} s for {topic} although "
                 f"{self.config.destination.alias} answers; they are dropped and a new producer is opened")
        return self._producer()

    def run(self, stop: threading.Event) -> None:
        topic = lag_topic(self.config.name)
        stamps = RecordTimestamps(self.source)
        producer = self._producer()
        pace, queue = LoopPace(self.min_spacing_s), StuckQueue(self.stuck_after_s)
        failed = summarised(self.log)
        try:
            due = ended = 0.0
            while not stop.wait(0.2):
                now = time.monotonic()
                if now - ended < pace.wait_s() or (now < due and not self._wake.is_set()):
                    continue
                self._wake.clear()
                full = now >= due
                if full:
                    due = now + max(self.config.metrics.sample_interval_s, pace.wait_s())
                try:
                    lags = self.sample(stamps) if full else self.sample_moved(stamps)
                    ended = time.monotonic()
                    pace.done(ended - now)
                    self.metrics.loop_round("lag", pace.last_round_s, len(lags), pace.period_s)
                    answering = self.config.destination.alias not in self._down
                    producer.poll(0)  # serves delivered samples' reports, which `len` counts until then
                    if queue.stuck(len(producer), answering, ended):
                        producer = self._reopened(producer, topic, queue.limit_s)
                    if answering:
                        producer.produce(topic, encode(sample_of(lags, int(time.time() * 1000))),
                                         on_delivery=self._delivered)
                        producer.poll(0)
                except Exception as exc:  # a cluster briefly away: the next sample tries again
                    failed(f"lag sample: {first_line(exc)}")
        finally:
            producer.flush(5)
            producer.close()
            stamps.close()
