"""Exactly once across crashes: find what a killed run already wrote, and skip it.

Spark's Kafka sink is at-least-once: after a crash the last micro-batch is replayed from
the checkpoint and records written before the crash would be written again. With
`preserve_partitions`, destination partition P receives this flow's records from source
partition P only, in origin-offset order (one producer per task, idempotent, ordered).
So the newest record in destination P whose last provenance header names this flow's
source cluster and topic tells the highest origin offset already copied, and the replayed
batch is filtered to offsets above it.

Invariant: the filter never drops a record that is not already in the destination.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

COPIED_UP_TO = "_copied_up_to"
_SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField(COPIED_UP_TO, LongType()),
])


def origin_of(headers: list[tuple[str, bytes | None]] | None, header: str) -> dict | None:
    """The last (newest hop's) provenance entry of a consumed record, or None."""
    for key, value in reversed(headers or []):
        if key != header:
            continue
        try:
            entry = json.loads(value or b"")
        except (ValueError, UnicodeDecodeError):
            return None
        return entry if isinstance(entry, dict) else None
    return None


@dataclass
class CopiedScanner:
    """Reads destination partitions backwards to find the last origin offset this flow copied."""

    destination: dict[str, str]
    header: str
    source_cluster_id: str
    first_window: int = 500
    log: Callable[[str], None] = print

    def last_copied(self, source_topic: str, partition: int, remote_topic: str) -> int | None:
        consumer = Consumer({
            **self.destination, "group.id": "dr-stream-scan", "enable.auto.commit": False,
            "enable.partition.eof": True, "auto.offset.reset": "earliest",
        })
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(remote_topic, partition), timeout=15)
            window = self.first_window
            while high > low:
                start = max(low, high - window)
                found, _ = self._scan(consumer, source_topic, partition, remote_topic, start, high)
                if found is not None:
                    return found
                high, window = start, window * 4
            return None
        finally:
            consumer.close()

    def _scan(self, consumer: Consumer, source_topic: str, partition: int, remote_topic: str,
              start: int, end: int) -> tuple[int | None, int]:
        consumer.assign([TopicPartition(remote_topic, partition, start)])
        best: int | None = None
        seen = 0
        while True:
            messages = consumer.consume(num_messages=5000, timeout=1)
            if not messages:
                break  # nothing more readable below `end` (aborted or compacted away)
            done = False
            for msg in messages:
                if msg.error():
                    done = True  # partition EOF
                    break
                if msg.offset() >= end:
                    done = True
                    break
                done = msg.offset() >= end - 1
                seen += 1
                origin = origin_of(msg.headers(), self.header)
                if (origin and origin.get("cluster") == self.source_cluster_id
                        and origin.get("topic") == source_topic and origin.get("partition") == partition
                        and isinstance(origin.get("offset"), int)):
                    best = origin["offset"] if best is None else max(best, origin["offset"])
                if done:
                    break
            if done:
                break
        return best, seen

    def watermarks(self, pairs: Iterable[tuple[str, int, str]]) -> list[tuple[str, int, int]]:
        """(source topic, partition, last copied origin offset) for the pairs that have one."""
        out = []
        for source_topic, partition, remote in pairs:
            offset = self.last_copied(source_topic, partition, remote)
            if offset is not None:
                out.append((source_topic, partition, offset))
        return out


def drop_already_copied(
    spark: SparkSession, watermarks: list[tuple[str, int, int]]
) -> Callable[[DataFrame], DataFrame]:
    """Keeps records whose origin offset is above what the destination already holds."""

    def step(df: DataFrame) -> DataFrame:
        if not watermarks:
            return df.withColumn("_already_copied", F.lit(False))
        marks = F.broadcast(spark.createDataFrame(watermarks, _SCHEMA))
        return (
            df.join(marks, on=["topic", "partition"], how="left")
            .withColumn("_already_copied", F.coalesce(F.col("offset") <= F.col(COPIED_UP_TO), F.lit(False)))
            .drop(COPIED_UP_TO)
        )

    return step
