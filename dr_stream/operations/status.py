"""`dr-stream status`: how far behind each replicated partition is, and how fresh translations are.

Replication lag per source partition is read against the offset index: records not copied
yet (`lag.records_behind`, from the last copied origin offset); seconds = age of the oldest
record not copied yet (0 when nothing waits). The index trails the copy by about one trigger
interval. The text form is `report.format_status`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dr_stream.config import FlowConfig
from dr_stream.kafka import clients
from dr_stream.kafka.admin import log_bounds, matching_partitions
from dr_stream.kafka.reachability import reachable_cluster_ids
from dr_stream.lag import records_behind
from dr_stream.offsets.consumer_timestamps import UNKNOWN_TIMESTAMP, RecordTimestamps
from dr_stream.offsets.index import OffsetIndex
from dr_stream.offsets.translation_log import TranslationLog


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    source_log_end: int | None
    last_copied: int | None
    lag_records: int | None
    lag_seconds: float | None


@dataclass(frozen=True)
class TranslationAge:
    group: str
    topic: str
    partition: int
    source_offset: int
    offset: int | None
    method: str
    action: str | None
    age_seconds: float


def replication_lag(config: FlowConfig, spark: SparkSession) -> list[PartitionLag]:
    # A cluster that refuses dr-stream stops the command; a source that is down is reported from the index.
    source_id, _ = reachable_cluster_ids([config.source, config.destination])
    copied = {
        (r.origin_topic, r.origin_partition): r.last
        for r in OffsetIndex(spark, config.streaming.offset_index).runs()
        .groupBy("origin_topic", "origin_partition").agg(F.max("origin_end").alias("last")).collect()
    }
    bounds = {}
    if source_id is not None:
        admin = clients.admin(config.source)
        bounds = log_bounds(admin, matching_partitions(admin, config.topic_filter, timeout=5), timeout=5)
    now_ms = time.time() * 1000
    stamps = RecordTimestamps(config.source) if bounds else None
    out = []
    try:
        for topic, partition in sorted(set(copied) | set(bounds)):
            start, end = bounds.get((topic, partition), (0, None))
            last = copied.get((topic, partition))
            lag = None if end is None else records_behind(start, end, None if last is None else last + 1)
            seconds = None
            if lag == 0:
                seconds = 0.0
            elif lag and stamps:
                ts = stamps.before(topic, partition, end - lag + 1)  # the oldest record not copied yet
                seconds = None if ts == UNKNOWN_TIMESTAMP else max(0.0, (now_ms - ts) / 1000)
            out.append(PartitionLag(topic, partition, end, last, lag, seconds))
    finally:
        if stamps:
            stamps.close()
    return out


def translation_ages(config: FlowConfig, spark: SparkSession) -> list[TranslationAge]:
    now = time.time()
    return [
        TranslationAge(r.group, r.topic, r.partition, r.source_offset, r.offset, r.method, r.action,
                       round(now - r.translated_at.timestamp(), 1))
        for r in TranslationLog(spark, config.streaming.translations).latest()
        .orderBy("group", "topic", "partition").collect()
    ]
