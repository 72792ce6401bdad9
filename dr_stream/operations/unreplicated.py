"""Unreplicated records: what the returning cluster had that never reached the one that took over.

Seen from a failback flow (source = the cluster that took over, destination = the cluster
coming back), the copies on the source name their originals by provenance. Per partition of
the returning cluster, the newest original with a copy on the source is M; every record
after M that did not itself come from the source was never replicated (the records lost to
RPO at failover time, back now).

Such records are either copied to the source now (`--include-unreplicated`), stamped as if the
forward flow had copied them so nothing copies them twice, or left out: then their last offsets
are recorded as left-out marks on the returning cluster (`replication.left_out`), and the
forward flow skips them when it resumes.

Invariant: the records reported, copied or left out are exactly the ones after M that are not
copies from the source; everything runs as Spark batch reads and Column expressions.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka.admin import AdminClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dr_stream.core.config import FlowConfig
from dr_stream.core.contracts import COPY_SINK
from dr_stream.core.policy import TopicRenamer
from dr_stream.kafka import spark_options
from dr_stream.kafka.admin import log_bounds, matching_partitions
from dr_stream.replication.left_out import mark_left_out
from dr_stream.replication.record_path import ReplicationPlan, prepare
from dr_stream.runtime.provenance_columns import CYCLE, cycle_flags, provenance_entries

SHOWN_OFFSETS = 20


@dataclass(frozen=True)
class UnreplicatedPartition:
    topic: str
    partition: int
    records: int
    first_offset: int
    last_offset: int
    first_timestamp: int
    last_timestamp: int
    offsets: tuple[int, ...]  # the first SHOWN_OFFSETS of them


class UnreplicatedRecords:
    """Finds, copies or leaves out the returning cluster's records the other cluster never got."""

    def __init__(self, spark: SparkSession, config: FlowConfig, source_cluster_id: str,
                 destination_cluster_id: str, destination_admin: AdminClient) -> None:
        self.spark = spark
        self._admin = destination_admin  # the command's, of its cluster context
        self.config = config
        self.source_cluster_id = source_cluster_id
        self.destination_cluster_id = destination_cluster_id
        self.header = config.provenance.header
        self._frame: DataFrame | None = None

    def _newest_originals(self) -> dict[tuple[str, int], int]:
        """Per returning-cluster partition: the newest origin offset that has a copy on the source."""
        options = spark_options.batch_source(self.config.source, self.config.topic_filter.subscribe_pattern())
        source = self.spark.read.format("kafka").options(**options).load()
        rows = (
            source.select(F.col("topic"), F.explode(provenance_entries(self.header)).alias("e"))
            .where((F.col("e.cluster") == F.lit(self.destination_cluster_id)) & (F.col("e.topic") == F.col("topic")))
            .groupBy(F.col("e.topic").alias("t"), F.col("e.partition").alias("p"))
            .agg(F.max("e.offset").alias("m"))
            .collect()
        )
        return {(r.t, r.p): r.m for r in rows}

    def _candidates(self) -> DataFrame | None:
        """Records of the returning cluster after the newest original the source has a copy of."""
        admin = self._admin
        bounds = log_bounds(admin, matching_partitions(admin, self.config.remote_topic_filter))
        newest = self._newest_originals()
        starts: dict[str, dict[str, int]] = {}
        ends: dict[str, dict[str, int]] = {}
        for (topic, partition), (log_start, log_end) in sorted(bounds.items()):
            start = max(log_start, newest.get((topic, partition), -1) + 1)
            if start < log_end:
                starts.setdefault(topic, {})[str(partition)] = start
                ends.setdefault(topic, {})[str(partition)] = log_end
        if not starts:
            return None
        return (
            self.spark.read.format("kafka").options(**spark_options.batch_range(self.config.destination, starts, ends))
            .load()
            # Records that came from the source are not this cluster's own: the source has them.
            .where(cycle_flags(self.header, self.source_cluster_id, F.col("topic")).bitwiseAND(F.lit(CYCLE)) == 0)
        )

    def find(self) -> list[UnreplicatedPartition]:
        self._frame = self._candidates()
        if self._frame is None:
            return []
        rows = (
            self._frame.groupBy("topic", "partition")
            .agg(
                F.count(F.lit(1)).alias("records"),
                F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"),
                F.unix_millis(F.min("timestamp")).alias("first_timestamp"),
                F.unix_millis(F.max("timestamp")).alias("last_timestamp"),
                F.slice(F.sort_array(F.collect_list("offset")), 1, SHOWN_OFFSETS).alias("offsets"),
            )
            .orderBy("topic", "partition").collect()
        )
        return [UnreplicatedPartition(r.topic, r.partition, r.records, r.first_offset, r.last_offset,
                                      r.first_timestamp, r.last_timestamp, tuple(r.offsets)) for r in rows]

    def copy(self) -> int:
        """Copies what `find` found to the source, as the forward flow would have copied it."""
        if self._frame is None:
            return 0
        forward = ReplicationPlan(
            source_cluster_id=self.destination_cluster_id, destination_cluster_id=self.source_cluster_id,
            renamer=TopicRenamer(), header=self.header, preserve_partitions=True,
        )
        rows = self._frame.transform(prepare(forward)).persist()
        try:
            copied = rows.count()
            rows.write.format(COPY_SINK).mode("append").options(
                **spark_options.sink(self.config.source, forward.renamer, forward.preserve_partitions,
                                     header=self.header, provenance_cluster=forward.provenance_cluster())).save()
        finally:
            rows.unpersist()
        return copied

    def leave_out(self, found: list[UnreplicatedPartition]) -> None:
        """Marks the found records so the forward flow never copies them."""
        if found:
            mark_left_out(self.config.destination, self.source_cluster_id,
                          {(p.topic, p.partition): p.last_offset for p in found})
