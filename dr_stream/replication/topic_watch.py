"""The flow's topics thread: destination topics kept in step with the source, and the replicate
query restarted when what it subscribed to no longer covers the source.

A new source topic is created on the destination here, then the query restarts to subscribe to
it: its records cannot reach the sink before the topic exists. So does a topic whose
`max.message.bytes` grows past what the sink's producer was sized for. New partitions of a
subscribed topic are read by the micro-batch source on its own; the sink's producer waits for
them on the destination (up to max.block.ms) until this loop has added them. In real-time mode
they restart the query. A topic created again (a new id) or a log ending below a resume mark
restarts it too (`loss_watch`): the old copies hide nothing.

`restart_reason` is the rule (pure); `TopicWatch` runs it every round, between and during
batches, and is told what each query start subscribed to (`started`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from dr_stream.failure_notes import summarised
from dr_stream.index import IndexFeed
from dr_stream.kafka import spark_options
from dr_stream.loop_pace import LoopPace
from dr_stream.replication.flow_metrics import FlowMetrics
from dr_stream.replication.holds import PartitionHolds
from dr_stream.replication.loss_watch import LossWatch
from dr_stream.replication.topic_sync import TopicSync

Partition = tuple[str, int]


@dataclass(frozen=True)
class Subscription:
    """What the running replicate query was started with."""

    topics: frozenset[str]
    partitions: int
    message_bytes: int  # the largest max.message.bytes its sink was sized for


def restart_reason(running: Subscription | None, replicated: Mapping[str, int], largest_message_bytes: int,
                   realtime: bool) -> str | None:
    """Why the query must restart to cover the source as `replicated` (topic -> partitions) now
    stands, or None. A real-time batch keeps the partitions it started with, so new ones restart
    it (and the task slots are checked again)."""
    if running is None:
        return None
    if set(replicated) - running.topics:
        return f"new source topics {sorted(set(replicated) - running.topics)}"
    if realtime and sum(replicated.values()) > running.partitions:
        return f"source partitions {running.partitions} -> {sum(replicated.values())}"
    if spark_options.outgrown(running.message_bytes, largest_message_bytes):
        return f"a source topic's max.message.bytes is now {largest_message_bytes}: the sink grows to match"
    return None


@dataclass
class TopicWatch:
    topic_sync: TopicSync
    metrics: FlowMetrics
    losses: LossWatch
    holds: PartitionHolds
    feed: IndexFeed | None
    realtime: bool
    request_restart: Callable[[str], None]
    log: Callable[[str], None]
    interval_s: float = 1.0
    recreation_check_s: float = 10.0
    _running: Subscription | None = None
    _marks: dict[Partition, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def sync(self) -> dict[str, int]:
        """One pass of the topic sync (a query start makes one too): source topic -> partitions."""
        with self._lock:
            return self.topic_sync.sync()

    def started(self, replicated: Mapping[str, int], message_bytes: int, marks: Mapping[Partition, int]) -> None:
        """A query start subscribed to `replicated`, its sink sized for `message_bytes`, with
        these resume marks."""
        self._running = Subscription(frozenset(replicated), sum(replicated.values()), message_bytes)
        self._marks = dict(marks)

    def run(self, stop: threading.Event) -> None:
        last_recreation_check = time.monotonic()
        pace = LoopPace(self.interval_s)
        failed = summarised(self.log)
        while not stop.wait(pace.wait_s()):
            try:
                began = time.monotonic()
                replicated = self.sync()
                pace.done(time.monotonic() - began)
                self.metrics.loop_round("topics", pace.last_round_s, len(replicated), pace.period_s)
                reason = restart_reason(self._running, replicated, self.topic_sync.largest_message_bytes,
                                        self.realtime)
                if reason:
                    self.request_restart(reason)
                if self.feed is not None:
                    self.losses.read_past(self.feed.take_uncopied())
                if time.monotonic() - last_recreation_check >= self.recreation_check_s:
                    last_recreation_check = time.monotonic()
                    changed = self.losses.source_changed(self._marks) or self.holds.changed()
                    if changed:
                        self.request_restart(changed)
            except Exception as exc:  # a cluster that is briefly away: the next pass tries again
                failed(f"topic sync: {exc}")
