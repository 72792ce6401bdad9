"""`__consumer_timestamps`: where each consumer group stands on the source.

A compacted topic on the source cluster. Key: JSON `{"group", "topic", "partition"}`;
value: JSON `{"offset": committed offset (next record to read), "timestamp": ms of the last
consumed record}`. Two writers fill it: `ConsumerTimestamps` (a helper for confluent-kafka
consumers, reporting at each commit) and `CommittedOffsetPoller` (dr-stream itself, from the
groups' committed offsets, so unmodified consumers in any language are covered).

Invariant: a record that does not parse is counted and skipped; it never stops a reader.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from dr_stream.core.config import ClusterConfig
from dr_stream.core.contracts import (
    CONSUMER_TIMESTAMPS_TOPIC,
    UNKNOWN_TIMESTAMP,
    position_key,
    position_value,
)
from dr_stream.kafka import clients, consumed
from dr_stream.kafka.admin import create_topic, partition_counts, settle_topic_configs
from dr_stream.kafka.cluster_context import ClusterContext

# Records between two wanted ones that a look-up reads through rather than seek again: a seek
# costs a fetch round trip, a record in the same fetch costs nothing.
MAX_SPAN_GAP = 500


def read_spans(offsets: list[int], max_gap: int) -> list[tuple[int, int]]:
    """Sorted record offsets -> (first, last) spans to read, a new span wherever more than
    `max_gap` records lie between two wanted ones."""
    spans: list[tuple[int, int]] = []
    for offset in offsets:
        if spans and offset - spans[-1][1] <= max_gap + 1:
            spans[-1] = (spans[-1][0], offset)
        else:
            spans.append((offset, offset))
    return spans



@dataclass(frozen=True)
class GroupCommit:
    """One group's position on one source partition."""

    group: str
    topic: str
    partition: int
    offset: int
    timestamp: int = UNKNOWN_TIMESTAMP

    @property
    def key(self) -> tuple[str, str, int]:
        return self.group, self.topic, self.partition

    def record_key(self) -> bytes:
        return position_key(self.group, self.topic, self.partition)

    def record_value(self) -> bytes:
        return position_value(self.offset, self.timestamp)


# Compaction keeps a position's newest record only, but takes only closed segments: with the
# broker's default roll (a week, or 1 GiB) a thousand groups committing every few seconds would
# keep hours of every position's records before the first compaction. A segment a minute: the
# topic then holds on disk what it keeps plus about a minute of commits (1,000 groups on 10
# partitions every 5 s wrote 18 MiB a partition in the 5 minutes an earlier roll took, which
# compaction made 0.35 MiB).
CONFIGS = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0", "segment.ms": str(60 * 1000)}


def ensure_topic(admin: AdminClient, partitions: int = 3, timeout: float = 30.0) -> bool:
    """Creates the compacted topic on the source if missing; True when it was created."""
    if CONSUMER_TIMESTAMPS_TOPIC in partition_counts(admin, timeout):
        return False
    return create_topic(admin, CONSUMER_TIMESTAMPS_TOPIC, partitions, CONFIGS, timeout)


def settle_topic(admin: AdminClient, timeout: float = 15.0) -> dict[str, str]:
    """Gives the topic an older release made the configs this one makes (`CONFIGS`); returns what
    it set."""
    return settle_topic_configs(admin, CONSUMER_TIMESTAMPS_TOPIC, CONFIGS, timeout)


def report(producer: Producer, commits: Iterable[GroupCommit],
           on_delivery: Callable[[GroupCommit, KafkaError | None], None] | None = None) -> int:
    """Produces each commit; `on_delivery` is told each one's outcome when the producer is polled."""
    n = 0
    for commit in commits:
        done = None if on_delivery is None else functools.partial(_delivered, on_delivery, commit)
        producer.produce(CONSUMER_TIMESTAMPS_TOPIC, key=commit.record_key(), value=commit.record_value(),
                         on_delivery=done)
        n += 1
    producer.poll(0)
    return n


def report_gone(producer: Producer, positions: Iterable[tuple[str, str, int]],
                on_delivery: Callable[[tuple[str, str, int], KafkaError | None], None]) -> int:
    """Produces a tombstone for each position (group, topic, partition): compaction then
    deletes the position's records, and a reader from the topic's start never meets it again."""
    n = 0
    for position in positions:
        producer.produce(CONSUMER_TIMESTAMPS_TOPIC, key=position_key(*position), value=None,
                         on_delivery=functools.partial(_delivered, on_delivery, position))
        n += 1
    producer.poll(0)
    return n


def _delivered(tell: Callable[[Any, KafkaError | None], None], commit: Any,
               error: KafkaError | None, _: Message) -> None:
    tell(commit, error)


def _as_cluster(where: ClusterConfig | Mapping[str, str]) -> ClusterConfig:
    """Applications pass their own client properties; dr-stream passes a cluster of its config."""
    if isinstance(where, ClusterConfig):
        return where
    properties = {k: str(v) for k, v in where.items()}
    bootstrap = properties.pop("bootstrap.servers")
    return ClusterConfig("application", bootstrap, properties)


class ConsumerTimestamps:
    """Client helper: makes a confluent-kafka consumer report its commits to `__consumer_timestamps`.

        stamps = ConsumerTimestamps(consumer, group_id, {"bootstrap.servers": ...})
        for msg in consumer.consume(...):
            process(msg)
            stamps.observe(msg)
        stamps.commit()          # commits the consumed positions and reports them

    Invariant: what is reported is exactly what was committed (next offset to read, and the
    timestamp of the last record consumed before it).
    """

    def __init__(self, consumer: Consumer, group: str, cluster: ClusterConfig | Mapping[str, str]) -> None:
        self.consumer = consumer
        self.group = group
        self._cluster = ClusterContext(_as_cluster(cluster))
        self.producer = self._cluster.producer({"linger.ms": 0})
        self._last: dict[tuple[str, int], tuple[int, int]] = {}

    def observe(self, message: Message) -> None:
        if message.error() is None:
            self._last[consumed.topic_partition(message)] = (consumed.offset(message), consumed.timestamp(message))

    def commit(self, timeout: float = 10.0) -> list[GroupCommit]:
        if not self._last:
            return []
        commits = [GroupCommit(self.group, t, p, offset + 1, ts) for (t, p), (offset, ts) in sorted(self._last.items())]
        self.consumer.commit(offsets=[TopicPartition(c.topic, c.partition, c.offset) for c in commits],
                             asynchronous=False)
        report(self.producer, commits)
        self.producer.flush(timeout)
        return commits

    def close(self) -> None:
        self.producer.flush(10)
        self.producer.close()
        self._cluster.close()


class RecordTimestamps:
    """Looks up the timestamp of the record just before a committed offset (its consumer is
    opened at the first look-up and closed by `close`)."""

    def __init__(self, cluster: ClusterContext, shared: bool = False) -> None:
        """`shared`: the cluster's one reader, lent (a command's); else a consumer of its own (a loop's)."""
        self._consumer: clients.OnDemandConsumer | clients.LentConsumer = cluster.reader() if shared else \
            cluster.consumer("dr-stream-timestamps", {"enable.partition.eof": True, "fetch.wait.max.ms": 10})

    def before_each(self, offsets: Iterable[tuple[str, int, int]],
                    timeout: float = 5.0) -> dict[tuple[str, int, int], int]:
        """The timestamp of record `offset - 1` for each (topic, partition, offset), or
        UNKNOWN_TIMESTAMP where it is not readable (nothing consumed yet, deleted by retention or
        compaction, a transaction marker). All partitions are read side by side, each over the
        spans `read_spans` makes of its offsets, so a round of thousands of groups is a few
        passes, not a look-up per group."""
        out = {at: UNKNOWN_TIMESTAMP for at in offsets}
        records: dict[tuple[str, int], set[int]] = {}
        for topic, partition, offset in out:
            if offset > 0:
                records.setdefault((topic, partition), set()).add(offset - 1)
        if not records:
            return out
        spans = {tp: read_spans(sorted(wanted), MAX_SPAN_GAP) for tp, wanted in records.items()}
        found: dict[tuple[str, int, int], int] = {}
        deadline = time.monotonic() + timeout
        for k in range(max(len(s) for s in spans.values())):
            span_ends = {tp: s[k] for tp, s in spans.items() if k < len(s)}

            def take(tp: tuple[str, int], msg: Message,
                     ends: dict[tuple[str, int], tuple[int, int]] = span_ends) -> bool:
                at = consumed.offset(msg)
                if at in records[tp]:
                    found[(*tp, at)] = consumed.timestamp(msg)
                return at >= ends[tp][1]

            self._read({tp: first for tp, (first, _) in span_ends.items()}, take, deadline)
        for (topic, partition, record), timestamp in found.items():
            out[(topic, partition, record + 1)] = timestamp
        return out

    def of_records(self, offsets: dict[tuple[str, int], int], timeout: float = 5.0) -> dict[tuple[str, int], int]:
        """The timestamp of the first readable record at or after each (topic, partition)'s
        offset, read in one pass over all of them; a partition with none within `timeout` (or
        none before its end) is left out."""
        found: dict[tuple[str, int], int] = {}

        def take(tp: tuple[str, int], msg: Message) -> bool:
            found[tp] = consumed.timestamp(msg)
            return True

        self._read(offsets, take, time.monotonic() + timeout)
        return found

    def _read(self, starts: dict[tuple[str, int], int], take: Callable[[tuple[str, int], Message], bool],
              deadline: float) -> None:
        """The one reader of both look-ups: every partition from its start, side by side, each
        record handed to `take` until it says the partition is done, the partition ends, or the
        deadline passes."""
        if not starts:
            return
        consumer = self._consumer.get()
        assigned = [TopicPartition(t, p, offset) for (t, p), offset in starts.items()]
        consumer.assign(assigned)
        open_partitions = set(starts)
        try:
            while open_partitions and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=1000, timeout=clients.CONSUME_WAIT_S):
                    tp = consumed.place(msg)
                    if tp is None or tp not in open_partitions:
                        continue
                    error = msg.error()
                    if error is not None and error.code() != KafkaError._PARTITION_EOF:
                        continue
                    if error is not None or take(tp, msg):
                        open_partitions.discard(tp)
                        consumer.pause([TopicPartition(*tp)])
        finally:
            # librdkafka keeps a partition paused across assignments: the next pass would read nothing
            consumer.resume(assigned)
            consumer.unassign()

    def close(self) -> None:
        self._consumer.close()
