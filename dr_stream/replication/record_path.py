"""The replication record path: source Kafka rows in, destination Kafka rows out.

Each step is a `DataFrame -> DataFrame` function composed with `df.transform`, so each can
be tested alone. Invariants: key, value, every header, the timestamp and (with
`preserve_partitions`) the partition of a copied record equal the source record's; a
tombstone stays a tombstone; nothing here runs Python per record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dr_stream.config import FilterOverride
from dr_stream.kafka.spark_options import TIMESTAMP_HEADER
from dr_stream.policy import TopicRenamer
from dr_stream.provenance import (
    MALFORMED,
    append_header,
    headers_or_empty,
    is_cycle,
    provenance_value,
    with_provenance,
)
from dr_stream.step import Step

DEST_TOPIC = "_dest_topic"
CYCLE = "_cycle"


@dataclass(frozen=True)
class ReplicationPlan:
    """What one flow does to each record; built once from the config and the cluster ids."""

    source_cluster_id: str
    destination_cluster_id: str
    renamer: TopicRenamer = field(default_factory=TopicRenamer)
    header: str = "__replicator_id"
    provenance_enabled: bool = True
    filter_overrides: Sequence[FilterOverride] = ()
    preserve_partitions: bool = True


def route_to_destination(renamer: TopicRenamer) -> Step:
    def step(df: DataFrame) -> DataFrame:
        return df.withColumn(DEST_TOPIC, renamer.remote_topic_column(F.col("topic")))

    return step


def mark_cycles(plan: ReplicationPlan) -> Step:
    """Adds `_cycle`: the record came from the destination topic, so copying it would loop."""

    def step(df: DataFrame) -> DataFrame:
        if not plan.provenance_enabled:
            return df.withColumn(CYCLE, F.lit(False))
        return df.withColumn(
            CYCLE, is_cycle(plan.destination_cluster_id, F.col(DEST_TOPIC), plan.filter_overrides)
        )

    return step


def drop_cycles(df: DataFrame) -> DataFrame:
    return df.where(~F.col(CYCLE))


def stamp_provenance(plan: ReplicationPlan) -> Step:
    """Appends this hop's provenance header and the transient timestamp header."""

    def step(df: DataFrame) -> DataFrame:
        headers = headers_or_empty(F.col("headers"))
        if plan.provenance_enabled:
            headers = append_header(headers, plan.header, provenance_value(plan.source_cluster_id))
        stamp = F.unix_millis(F.col("timestamp")).cast("string").cast("binary")
        return df.withColumn("_sink_headers", append_header(headers, TIMESTAMP_HEADER, stamp))

    return step


def replication_metrics(df: DataFrame) -> DataFrame:
    """Counts per batch, computed in the same pass as the copy (Spark observed metrics)."""
    return df.observe(
        "replicate",
        F.count(F.lit(1)).alias("records"),
        F.sum(F.col(CYCLE).cast("long")).alias("skipped_cycle"),
        F.sum(F.col(MALFORMED).cast("long")).alias("malformed_provenance"),
    )


def prepare(plan: ReplicationPlan) -> Step:
    """Source rows -> rows ready for the sink, still carrying the origin columns."""

    def step(df: DataFrame) -> DataFrame:
        return (
            df.transform(with_provenance(plan.header))
            .transform(route_to_destination(plan.renamer))
            .transform(mark_cycles(plan))
            .transform(replication_metrics)
            .transform(drop_cycles)
            .transform(stamp_provenance(plan))
        )

    return step


def to_sink_rows(preserve_partitions: bool) -> Step:
    def step(df: DataFrame) -> DataFrame:
        columns = [
            F.col(DEST_TOPIC).alias("topic"),
            F.col("key"),
            F.col("value"),
            F.col("_sink_headers").alias("headers"),
        ]
        if preserve_partitions:
            columns.append(F.col("partition"))
        return df.select(*columns)

    return step

