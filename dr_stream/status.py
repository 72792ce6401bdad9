"""`dr-stream status`: how far behind each replicated partition is, and how fresh translations are.

Replication lag per source partition is read against the offset index: records = source
log end - (last copied origin offset + 1); seconds = age of the oldest record not copied
yet (0 when nothing waits). The index trails the copy by about one trigger interval.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dr_stream.config import FlowConfig
from dr_stream.consumer_timestamps import UNKNOWN_TIMESTAMP, RecordTimestamps
from dr_stream.index import OffsetIndex
from dr_stream.policy import TopicFilter
from dr_stream.topics import admin_client, log_bounds, matching_partitions
from dr_stream.translation_log import TranslationLog


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
    copied = {
        (r.origin_topic, r.origin_partition): r.last
        for r in OffsetIndex(spark, config.streaming.offset_index).runs()
        .groupBy("origin_topic", "origin_partition").agg(F.max("origin_end").alias("last")).collect()
    }
    topics = TopicFilter(config.topics.include, config.topics.exclude)
    try:
        admin = admin_client(config.source.client_properties())
        partitions = matching_partitions(admin, topics, timeout=5)
        ends = {k: end for k, (_, end) in log_bounds(admin, partitions, timeout=5).items()}
    except Exception:  # source down: report what the index knows
        ends = {}
    now_ms = time.time() * 1000
    stamps = RecordTimestamps(config.source.client_properties()) if ends else None
    out = []
    try:
        for topic, partition in sorted(set(copied) | set(ends)):
            end, last = ends.get((topic, partition)), copied.get((topic, partition))
            lag = None if end is None else max(0, end - (last + 1 if last is not None else 0))
            seconds = None
            if lag == 0:
                seconds = 0.0
            elif lag and stamps:
                first_waiting = last + 1 if last is not None else 0
                ts = stamps.before(topic, partition, first_waiting + 1)
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


def format_status(lags: list[PartitionLag], ages: list[TranslationAge]) -> str:
    def cell(v) -> str:
        return "-" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v))

    out = ["replication lag (topic partition: source log end, last copied origin offset, lag records, lag seconds)"]
    out += [f"  {g.topic}[{g.partition}]: {cell(g.source_log_end)}, {cell(g.last_copied)}, "
            f"{cell(g.lag_records)}, {cell(g.lag_seconds)}" for g in lags] or ["  (nothing replicated yet)"]
    out.append("last translated offsets (group topic partition: source offset -> destination offset, method, "
               "age seconds, action)")
    out += [f"  {a.group} {a.topic}[{a.partition}]: {a.source_offset} -> {cell(a.offset)}, {a.method}, "
            f"{a.age_seconds:.1f}s, {a.action or '-'}" for a in ages] or ["  (no translations recorded)"]
    return "\n".join(out)
