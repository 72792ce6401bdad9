"""Offset translation (DESIGN 1.6): a group's source position -> the same position on the destination.

For a group committed at C on source partition P (C = next record to read):
- `exact`: the destination offset of the first record this flow copied with origin offset >= C;
- `next`: nothing at or after C was copied yet: the destination offset just after the last
  record copied from P (the consumer resumes with what arrives next);
- `returned`: the source record at C is itself a copy of a destination record (after a
  failover, the cluster coming back is the destination): that original's offset. At the end of
  the source log, just after the original of the last such copy, unless `next` is further on;
- `timestamp`: the index has nothing for P: the earliest destination offset whose timestamp is
  >= the timestamp of the last record the group consumed;
- `none`: not translatable (no index and no timestamp, or no destination partition).
Then every offset is clamped to the destination's [log start, log end], and a clamp is
reported in `note`.

Invariant: an `exact` translation never lands after the first copied record the group has
not consumed, and never before a copied record it has consumed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dr_stream.consumer_timestamps import UNKNOWN_TIMESTAMP, GroupCommit
from dr_stream.index import OffsetIndex
from dr_stream.policy import TopicRenamer
from dr_stream.returned_records import ReturnedRecords
from dr_stream.topics import log_bounds

COMMIT_SCHEMA = "group string, topic string, partition int, offset long, timestamp long"

Step = Callable[[DataFrame], DataFrame]


def translate_commits(runs: DataFrame, renamer: TopicRenamer) -> Step:
    """Commits (group, topic, partition, offset, timestamp) -> translated offsets through the index runs.

    Output: group, topic, partition, source_offset, source_timestamp, dest_topic, dest_partition,
    translated (null when the index has nothing for the partition), method, last_copied.
    """

    def step(commits: DataFrame) -> DataFrame:
        targets = (
            commits.withColumn("dest_topic", renamer.remote_topic_column(F.col("topic")))
            .withColumn("dest_partition", F.col("partition"))
        )
        r = runs.select(
            F.col("origin_topic").alias("topic"), F.col("origin_partition").alias("partition"),
            "dest_topic", "dest_partition", "origin_start", "origin_end", "dest_start", "dest_end",
        )
        at_or_after = F.when(
            F.col("origin_end") >= F.col("offset"),
            F.col("dest_start") + F.greatest(F.col("offset") - F.col("origin_start"), F.lit(0)),
        )
        found = (
            targets.join(r, on=["topic", "partition", "dest_topic", "dest_partition"], how="left")
            .groupBy("group", "topic", "partition", "offset", "timestamp", "dest_topic", "dest_partition")
            .agg(
                F.min(at_or_after).alias("_first_at_or_after"),
                (F.max("dest_end") + 1).alias("_after_last"),
                F.max("origin_end").alias("last_copied"),
            )
        )
        return found.select(
            "group", "topic", "partition",
            F.col("offset").alias("source_offset"),
            F.col("timestamp").alias("source_timestamp"),
            "dest_topic", "dest_partition",
            F.coalesce("_first_at_or_after", "_after_last").alias("translated"),
            F.when(F.col("_first_at_or_after").isNotNull(), F.lit("exact"))
            .when(F.col("_after_last").isNotNull(), F.lit("next"))
            .otherwise(F.lit("timestamp")).alias("method"),
            "last_copied",
        )

    return step


@dataclass(frozen=True)
class Translation:
    group: str
    topic: str
    partition: int
    source_offset: int
    source_timestamp: int
    dest_topic: str
    dest_partition: int
    offset: int | None
    method: str
    note: str
    clamped: bool
    log_start: int | None
    log_end: int | None
    last_copied: int | None
    source_log_end: int | None
    translated_at: int

    @property
    def key(self) -> tuple[str, str, int]:
        return self.group, self.topic, self.partition

    @property
    def unreplicated(self) -> int | None:
        """Records on the source partition never copied (lost to RPO if the source is gone)."""
        if self.source_log_end is None:
            return None
        return max(0, self.source_log_end - (self.last_copied + 1 if self.last_copied is not None else 0))


def clamp(offset: int, log_start: int, log_end: int) -> tuple[int, str]:
    """The offset within [log_start, log_end], with a note when it had to move."""
    if offset < log_start:
        return log_start, f"clamped {offset} -> {log_start} (destination log start)"
    if offset > log_end:
        return log_end, f"clamped {offset} -> {log_end} (destination log end)"
    return offset, ""


class OffsetTranslator:
    """Translates commits through the flow's offset index and the destination's logs."""

    def __init__(self, spark: SparkSession, index: OffsetIndex, renamer: TopicRenamer,
                 destination: dict[str, str], source: dict[str, str] | None = None,
                 origin_cluster: str | None = None,
                 known_source_ends: dict[tuple[str, int], int] | None = None,
                 returned: ReturnedRecords | None = None) -> None:
        self.spark = spark
        self.index = index
        self.renamer = renamer
        self.destination = destination
        self._dest_admin = AdminClient(dict(destination))
        self._source_admin = AdminClient(dict(source)) if source else None
        self.origin_cluster = origin_cluster
        self._dest_consumer: Consumer | None = None
        # With the source gone, the log ends it last reported stand in for the live ones.
        self.known_source_ends = known_source_ends or {}
        self.returned = returned

    def _runs(self) -> DataFrame:
        runs = self.index.runs()
        if self.origin_cluster:
            runs = runs.where(F.col("origin_cluster") == self.origin_cluster)
        return runs

    def translate(self, commits: Iterable[GroupCommit]) -> list[Translation]:
        commits = list(commits)
        if not commits:
            return []
        frame = self.spark.createDataFrame([(c.group, c.topic, c.partition, c.offset, c.timestamp) for c in commits],
                                           COMMIT_SCHEMA)
        rows = frame.transform(translate_commits(self._runs(), self.renamer)).collect()
        bounds = log_bounds(self._dest_admin, [(r.dest_topic, r.dest_partition) for r in rows])
        source_ends = self._source_ends([(r.topic, r.partition) for r in rows])
        now = int(time.time() * 1000)
        out = []
        for r in rows:
            t = Translation(
                r.group, r.topic, r.partition, r.source_offset, r.source_timestamp, r.dest_topic, r.dest_partition,
                r.translated, r.method, "", False, None, None, r.last_copied,
                source_ends.get((r.topic, r.partition)), now,
            )
            if self.returned is not None:
                t = self._through_returned(t)
            out.append(self._finish(t, bounds.get((r.dest_topic, r.dest_partition))))
        return sorted(out, key=lambda t: t.key)

    def _through_returned(self, t: Translation) -> Translation:
        original = self.returned.original_at(t.topic, t.partition, t.source_offset, t.dest_topic)
        if original is not None:
            return replace(t, offset=original, method="returned")
        if t.method == "exact":
            return t
        # Nothing at or after C maps over yet: resume after the last original the group read.
        before = self.returned.original_at(t.topic, t.partition, t.source_offset - 1, t.dest_topic)
        if before is not None and (t.method != "next" or before + 1 > t.offset):
            return replace(t, offset=before + 1, method="returned")
        return t

    def _finish(self, t: Translation, bounds: tuple[int, int] | None) -> Translation:
        if bounds is None:
            missing = f"destination partition {t.dest_topic}[{t.dest_partition}] does not exist"
            return replace(t, offset=None, method="none", note=missing)
        log_start, log_end = bounds
        t = replace(t, log_start=log_start, log_end=log_end)
        notes = []
        if t.method == "timestamp":
            if t.source_timestamp == UNKNOWN_TIMESTAMP:
                return replace(t, offset=None, method="none",
                               note="offset index has nothing for this partition and the commit has no timestamp")
            t = replace(t, offset=self._offset_for_time(t.dest_topic, t.dest_partition, t.source_timestamp, log_end))
            notes.append(f"fallback: offset index has nothing for this partition; by timestamp {t.source_timestamp}")
        offset, clamp_note = clamp(t.offset, log_start, log_end)
        if clamp_note:
            notes.append(clamp_note)
        return replace(t, offset=offset, clamped=bool(clamp_note), note="; ".join(notes))

    def _offset_for_time(self, topic: str, partition: int, timestamp: int, log_end: int) -> int:
        if self._dest_consumer is None:
            self._dest_consumer = Consumer({**self.destination, "group.id": "dr-stream-translate",
                                            "enable.auto.commit": False})
        found = self._dest_consumer.offsets_for_times([TopicPartition(topic, partition, timestamp)], timeout=15)[0]
        return found.offset if found.offset >= 0 else log_end

    def _source_ends(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        if self._source_admin is None:
            return dict(self.known_source_ends)
        try:
            return {k: end for k, (_, end) in log_bounds(self._source_admin, partitions, timeout=5).items()}
        except Exception:  # the source may be down (that is what failover is for): ends unknown
            return {}

    def close(self) -> None:
        if self._dest_consumer is not None:
            self._dest_consumer.close()
        if self.returned is not None:
            self.returned.close()
