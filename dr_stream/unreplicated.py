"""Unreplicated records: what the returning cluster had that never reached the one that took over.

Seen from a failback flow (source = the cluster that took over, destination = the cluster
coming back), the copies on the source name their originals by provenance. Per partition of
the returning cluster, the newest original with a copy on the source is M; every record
after M that did not itself come from the source was never replicated (the white paper's
2 of 10000: lost to RPO at failover time, back now).

Such records are either copied to the source now (`--include-unreplicated`), stamped as if the
forward flow had copied them so nothing copies them twice, or left out: then their last offset
is committed for the group `skip_group(source cluster.id)` on the returning cluster, and the
forward flow skips them when it resumes (`already_copied`).

Invariant: the records reported, copied or left out are exactly the ones after M that are not
copies from the source; everything runs as Spark batch reads and Column expressions.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dr_stream.config import ClusterConfig, FlowConfig
from dr_stream.groups import SYNC_METADATA_PREFIX, commit_offsets, committed_offsets
from dr_stream.policy import TopicFilter, TopicRenamer
from dr_stream.provenance import PROVENANCE, is_cycle, with_provenance
from dr_stream.replicate import ReplicationPlan, prepare, to_sink_rows
from dr_stream.topics import admin_client, log_bounds, matching_partitions

SHOWN_OFFSETS = 20


def skip_group(destination_cluster_id: str) -> str:
    """The group, on a flow's source, whose offsets mark records that flow must not copy."""
    return f"dr-stream-left-out.{destination_cluster_id}"


def read_skip_marks(source: dict[str, str], destination_cluster_id: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> last origin offset left out at failback; empty when there is none."""
    marks = committed_offsets(admin_client(source), skip_group(destination_cluster_id))
    return {k: c.offset - 1 for k, c in marks.items()}


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


def _kafka(cluster: ClusterConfig) -> dict[str, str]:
    options = {"kafka.bootstrap.servers": cluster.bootstrap_servers, "includeHeaders": "true",
               "kafka.isolation.level": "read_committed", "failOnDataLoss": "false"}
    options.update({f"kafka.{k}": v for k, v in cluster.kafka.items()})
    return options


class UnreplicatedRecords:
    """Finds, copies or leaves out the returning cluster's records the other cluster never got."""

    def __init__(self, spark: SparkSession, config: FlowConfig, source_cluster_id: str,
                 destination_cluster_id: str) -> None:
        self.spark = spark
        self.config = config
        self.source_cluster_id = source_cluster_id
        self.destination_cluster_id = destination_cluster_id
        self.header = config.provenance.header
        self.topics = TopicFilter(config.topics.include, config.topics.exclude)
        self._frame: DataFrame | None = None

    def _newest_originals(self) -> dict[tuple[str, int], int]:
        """Per returning-cluster partition: the newest origin offset that has a copy on the source."""
        source = (
            self.spark.read.format("kafka").options(**_kafka(self.config.source))
            .option("subscribePattern", self.topics.subscribe_pattern())
            .option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
        )
        rows = (
            source.transform(with_provenance(self.header))
            .select(F.col("topic"), F.explode(PROVENANCE).alias("e"))
            .where((F.col("e.cluster") == F.lit(self.destination_cluster_id)) & (F.col("e.topic") == F.col("topic")))
            .groupBy(F.col("e.topic").alias("t"), F.col("e.partition").alias("p"))
            .agg(F.max("e.offset").alias("m"))
            .collect()
        )
        return {(r.t, r.p): r.m for r in rows}

    def _candidates(self) -> DataFrame | None:
        """Records of the returning cluster after the newest original the source has a copy of."""
        admin = admin_client(self.config.destination.client_properties())
        bounds = log_bounds(admin, matching_partitions(admin, self.topics))
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
            self.spark.read.format("kafka").options(**_kafka(self.config.destination))
            .option("assign", json.dumps({t: [int(p) for p in ps] for t, ps in starts.items()}))
            .option("startingOffsets", json.dumps(starts)).option("endingOffsets", json.dumps(ends)).load()
            .transform(with_provenance(self.header))
            # Records that came from the source are not this cluster's own: the source has them.
            .where(~is_cycle(self.source_cluster_id, F.col("topic")))
            .drop(PROVENANCE)
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
        from dr_stream.flow import sink_options

        if self._frame is None:
            return 0
        forward = ReplicationPlan(
            source_cluster_id=self.destination_cluster_id, destination_cluster_id=self.source_cluster_id,
            renamer=TopicRenamer(), header=self.header, preserve_partitions=True,
        )
        rows = self._frame.drop("_malformed_provenance").transform(prepare(forward)).persist()
        try:
            copied = rows.count()
            rows.transform(to_sink_rows(True)).write.format("kafka").options(
                **sink_options(self.config.source)).save()
        finally:
            rows.unpersist()
        return copied

    def leave_out(self, found: list[UnreplicatedPartition]) -> None:
        """Marks the found records so the forward flow never copies them."""
        if not found:
            return
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        commit_offsets(
            admin_client(self.config.destination.client_properties()), skip_group(self.source_cluster_id),
            {(p.topic, p.partition): p.last_offset + 1 for p in found},
            f"{SYNC_METADATA_PREFIX}left out at failback {stamp}",
        )
