"""`__consumer_timestamps`: where each consumer group stands on the source.

A compacted topic on the source cluster. Key: JSON `{"group", "topic", "partition"}`;
value: JSON `{"offset": committed offset (next record to read), "timestamp": ms of the last
consumed record}`. Two writers fill it: `ConsumerTimestamps` (a helper for confluent-kafka
consumers, reporting at each commit) and `CommittedOffsetPoller` (dr-stream itself, from the
groups' committed offsets, so unmodified consumers in any language are covered).

Invariant: a record that does not parse is counted and skipped; it never stops a reader.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from dr_stream.config import ClusterConfig
from dr_stream.kafka import clients
from dr_stream.kafka.admin import create_topic, partition_counts

TOPIC = "__consumer_timestamps"
UNKNOWN_TIMESTAMP = -1

KEY_SCHEMA = StructType([
    StructField("group", StringType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
])
VALUE_SCHEMA = StructType([StructField("offset", LongType()), StructField("timestamp", LongType())])


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
        return json.dumps({"group": self.group, "topic": self.topic, "partition": self.partition},
                          separators=(",", ":")).encode()

    def record_value(self) -> bytes:
        return json.dumps({"offset": self.offset, "timestamp": self.timestamp}, separators=(",", ":")).encode()


def ensure_topic(admin: AdminClient, partitions: int = 3, timeout: float = 30.0) -> bool:
    """Creates the compacted topic on the source if missing; True when it was created."""
    if TOPIC in partition_counts(admin, timeout):
        return False
    config = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}
    return create_topic(admin, TOPIC, partitions, config, timeout)


def parse_consumer_timestamps(df: DataFrame) -> DataFrame:
    """Kafka rows of the topic -> group, topic, partition, offset, timestamp, `_malformed`.

    A tombstone (null value) is compaction's way of forgetting a key and is dropped; anything
    else that lacks a field or is not JSON is kept with `_malformed` true for counting.
    """
    key = F.from_json(F.col("key").cast("string"), KEY_SCHEMA, {"mode": "PERMISSIVE"})
    value = F.from_json(F.col("value").cast("string"), VALUE_SCHEMA, {"mode": "PERMISSIVE"})
    parsed = (
        df.where(F.col("value").isNotNull())
        .select(F.col("offset").alias("_record_offset"), key.alias("k"), value.alias("v"))
        .select(
            "_record_offset",
            F.col("k.group").alias("group"),
            F.col("k.topic").alias("topic"),
            F.col("k.partition").alias("partition"),
            F.col("v.offset").alias("offset"),
            F.coalesce(F.col("v.timestamp"), F.lit(UNKNOWN_TIMESTAMP)).alias("timestamp"),
        )
    )
    complete = (
        F.col("group").isNotNull() & F.col("topic").isNotNull() & F.col("partition").isNotNull()
        & (F.col("partition") >= 0) & F.col("offset").isNotNull() & (F.col("offset") >= 0)
    )
    return parsed.withColumn("_malformed", ~F.coalesce(complete, F.lit(False)))


def latest_per_partition(df: DataFrame) -> DataFrame:
    """Well-formed rows -> the newest commit per (group, topic, partition) in this batch."""
    newest = F.max_by(F.struct("offset", "timestamp"), F.col("_record_offset"))
    return (
        df.where(~F.col("_malformed"))
        .groupBy("group", "topic", "partition")
        .agg(newest.alias("c"))
        .select("group", "topic", "partition", F.col("c.offset").alias("offset"),
                F.col("c.timestamp").alias("timestamp"))
    )


def report(producer: Producer, commits: Iterable[GroupCommit]) -> int:
    n = 0
    for commit in commits:
        producer.produce(TOPIC, key=commit.record_key(), value=commit.record_value())
        n += 1
    producer.poll(0)
    return n


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
        self.producer = clients.producer(_as_cluster(cluster), {"linger.ms": 0})
        self._last: dict[tuple[str, int], tuple[int, int]] = {}

    def observe(self, message: Message) -> None:
        if message.error() is None:
            self._last[(message.topic(), message.partition())] = (message.offset(), message.timestamp()[1])

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


class RecordTimestamps:
    """Looks up the timestamp of the record just before a committed offset (its consumer is
    opened at the first look-up and closed by `close`)."""

    def __init__(self, cluster: ClusterConfig) -> None:
        self._consumer = clients.OnDemandConsumer(cluster, "dr-stream-timestamps", {"enable.partition.eof": True})

    def before(self, topic: str, partition: int, offset: int, timeout: float = 5.0) -> int:
        """Timestamp of record `offset - 1`, or UNKNOWN_TIMESTAMP when it is not readable
        (nothing consumed yet, deleted by retention or compaction, or a transaction marker)."""
        if offset <= 0:
            return UNKNOWN_TIMESTAMP
        consumer = self._consumer.get()
        consumer.assign([TopicPartition(topic, partition, offset - 1)])
        try:
            for msg in consumer.consume(num_messages=1, timeout=timeout):
                if msg.error() is None and msg.offset() == offset - 1:
                    return msg.timestamp()[1]
            return UNKNOWN_TIMESTAMP
        finally:
            consumer.unassign()

    def close(self) -> None:
        self._consumer.close()
