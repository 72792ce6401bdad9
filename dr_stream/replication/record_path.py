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


def sink_headers(plan: ReplicationPlan) -> Column:
    """The record's headers, then this hop's provenance header and the transient timestamp header."""
    headers = headers_or_empty(F.col("headers"))
    if plan.provenance_enabled:
        headers = append_header(headers, plan.header, provenance_value(plan.source_cluster_id))
    stamp = F.unix_millis(F.col("timestamp")).cast("string").cast("binary")
    return append_header(headers, TIMESTAMP_HEADER, stamp)


def prepare(plan: ReplicationPlan) -> Step:
    """Source rows -> the rows to copy, as the source gave them, counted (`replication_metrics`).

    Nothing here adds a column: the counts observe the source's rows and the cycle rule is a
    filter, so a record's value is copied once, by `to_sink_rows`. A projection holding the
    provenance rule cannot be compiled into a whole stage (its higher-order functions are
    evaluated outside generated code), and adding the rule's columns in one copied every value
    once more. The rule is evaluated twice per record (count and filter); a record without a
    provenance header stops at `has_header` both times."""

    def step(df: DataFrame) -> DataFrame:
        return df.transform(replication_metrics(plan)).transform(drop_cycles(plan))

    return step


def to_sink_rows(plan: ReplicationPlan) -> Step:
    """The rows the Kafka sink writes, in one projection: the destination topic (the rename),
    key, value, the stamped headers and (with `preserve_partitions`) the partition."""

    def step(df: DataFrame) -> DataFrame:
        columns = [
            plan.renamer.remote_topic_column(F.col("topic")).alias("topic"),
            F.col("key"),
            F.col("value"),
            sink_headers(plan).alias("headers"),
        ]
        if plan.preserve_partitions:
            columns.append(F.col("partition"))
        return df.select(*columns)

    return step
