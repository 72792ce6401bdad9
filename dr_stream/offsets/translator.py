"""Gathers what the translation rule needs from the offset index and the clusters, and applies it.

The rule itself is in `translation`; this class only reads: the index runs (Spark), the
destination's log bounds and, where the rule asks, offsets by timestamp (admin client and
consumer), the source's log ends, and returned records.

Invariant: constructing a translator opens no connection; its clients are opened at first use
and released by `close`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dr_stream.config import ClusterConfig
from dr_stream.kafka import clients
from dr_stream.kafka.admin import log_bounds
from dr_stream.offsets.consumer_timestamps import GroupCommit
from dr_stream.offsets.index import OffsetIndex
from dr_stream.offsets.returned_records import ReturnedRecords
from dr_stream.offsets.translation import (
    COMMIT_SCHEMA,
    Translation,
    needs_timestamp,
    settle,
    through_returned,
    translate_commits,
)
from dr_stream.policy import TopicRenamer


class OffsetTranslator:
    """Translates commits through the flow's offset index and the destination's logs."""

    def __init__(self, spark: SparkSession, index: OffsetIndex, renamer: TopicRenamer,
                 destination: ClusterConfig, source: ClusterConfig | None = None,
                 origin_cluster: str | None = None,
                 known_source_ends: dict[tuple[str, int], int] | None = None,
                 returned: ReturnedRecords | None = None) -> None:
        self.spark = spark
        self.index = index
        self.renamer = renamer
        self.destination = destination
        # None when the source is gone: the log ends it last reported stand in for the live ones.
        self.source = source
        self.origin_cluster = origin_cluster
        self.known_source_ends = known_source_ends or {}
        self.returned = returned
        self._admins: dict[str, AdminClient] = {}
        self._dest_consumer = clients.OnDemandConsumer(destination, "dr-stream-translate")

    def _admin(self, cluster: ClusterConfig) -> AdminClient:
        if cluster.alias not in self._admins:
            self._admins[cluster.alias] = clients.admin(cluster)
        return self._admins[cluster.alias]

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
        bounds = log_bounds(self._admin(self.destination), [(r.dest_topic, r.dest_partition) for r in rows])
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
                t = through_returned(t, lambda o, t=t: self.returned.original_at(t.topic, t.partition, o, t.dest_topic))
            found = bounds.get((t.dest_topic, t.dest_partition))
            by_timestamp = self._offset_for_time(t) if needs_timestamp(t, found) else None
            out.append(settle(t, found, by_timestamp))
        return sorted(out, key=lambda t: t.key)

    def _offset_for_time(self, t: Translation) -> int | None:
        wanted = TopicPartition(t.dest_topic, t.dest_partition, t.source_timestamp)
        found = self._dest_consumer.get().offsets_for_times([wanted], timeout=15)[0]
        return found.offset if found.offset >= 0 else None

    def _source_ends(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        if self.source is None:
            return dict(self.known_source_ends)
        try:
            return {k: end for k, (_, end) in log_bounds(self._admin(self.source), partitions, timeout=5).items()}
        except Exception:  # the source may be down (that is what failover is for): ends unknown
            return {}

    def close(self) -> None:
        self._dest_consumer.close()
        if self.returned is not None:
            self.returned.close()
