"""The replication record path: source Kafka rows in, destination Kafka rows out.

Each step is a `DataFrame -> DataFrame` function composed with `df.transform`, so each can
be tested alone. Invariants: key, value, every header, the timestamp and (with
`preserve_partitions`) the partition of a copied record equal the source record's; a
tombstone stays a tombstone; nothing here runs Python per record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dr_stream.config import FilterOverride
from dr_stream.kafka.spark_options import TIMESTAMP_HEADER
from dr_stream.policy import TopicRenamer
from dr_stream.provenance import (
    append_header,
    headers_or_empty,
    is_cycle,
    malformed_provenance,
    provenance_entries,
    provenance_value,
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


def cycle(plan: ReplicationPlan) -> Column:
    """True when the record came from the destination topic, so copying it would loop."""
    if not plan.provenance_enabled:
        return F.lit(False)
    return is_cycle(plan.destination_cluster_id, plan.renamer.remote_topic_column(F.col("topic")),
                    plan.filter_overrides, provenance_entries(plan.header))


def mark_cycles(plan: ReplicationPlan) -> Step:
    """Adds `_cycle` (`cycle`), for a reader of the rule's outcome."""

    def step(df: DataFrame) -> DataFrame:
        return df.withColumn(CYCLE, cycle(plan))

    return step


def replication_metrics(plan: ReplicationPlan) -> Step:
    """Counts per batch of what the source gave, computed in the same pass as the copy (Spark
    observed metrics): records, those that came from the destination, those with a provenance
    header that did not parse."""

    def step(df: DataFrame) -> DataFrame:
        malformed = malformed_provenance(plan.header) if plan.provenance_enabled else F.lit(False)
        return df.observe(
            "replicate",
            # Every record has a timestampType: counting it counts records, and names the one
            # column of the source that nothing downstream reads. Without a reader, Spark drops
            # it in a projection of its own under the counts, which copies every row.
            F.count(F.col("timestampType")).alias("records"),
            F.sum(cycle(plan).cast("long")).alias("skipped_cycle"),
            F.sum(malformed.cast("long")).alias("malformed_provenance"),
        )

    return step


def drop_cycles(plan: ReplicationPlan) -> Step:
    def step(df: DataFrame) -> DataFrame:
        return df.where(~cycle(plan))

    return step


def stamp_provenance(plan: ReplicationPlan) -> Step:
    """Appends this hop's provenance header and the transient timestamp header."""

    def step(df: DataFrame) -> DataFrame:
        headers = headers_or_empty(F.col("headers"))
        if plan.provenance_enabled:
            headers = append_header(headers, plan.header, provenance_value(plan.source_cluster_id))
        stamp = F.unix_millis(F.col("timestamp")).cast("string").cast("binary")
        return df.withColumn("_sink_headers", append_header(headers, TIMESTAMP_HEADER, stamp))

    return step


def prepare(plan: ReplicationPlan) -> Step:
    """Source rows -> rows ready for the sink, still carrying the origin columns.

    The cycle rule and the counts are evaluated where they add no column: the counts observe the
    source's rows as they are and the cycle rule is a filter, so the value is copied once, in
    the one projection that Spark compiles into a whole stage. A projection holding the
    provenance rule cannot be (its higher-order functions are evaluated outside generated code),
    and adding the rule's columns there copied every record's value once more. The rule is
    evaluated twice per record (count and filter); a record without a provenance header stops
    at `has_header` both times."""

    def step(df: DataFrame) -> DataFrame:
        return (
            df.transform(replication_metrics(plan))
            .transform(drop_cycles(plan))
            .transform(route_to_destination(plan.renamer))
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

