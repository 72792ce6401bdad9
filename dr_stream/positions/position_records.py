"""`__consumer_timestamps` records as group positions, in Spark: the translate query's steps.

Each step is a plain `DataFrame -> DataFrame` function; the positions are read by dr-stream's
Java reader (`io.drstream.spark.GroupPositions`), the only reader of the topic, held to the
golden fixture `tests/contracts/consumer_timestamps.json` like the writers in `core/contracts`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.classic.column import Column as JvmColumn

from dr_stream.runtime.jvm_classes import jvm_view

KEY = ("group", "topic", "partition")


def group_positions(records: DataFrame) -> DataFrame:
    """Kafka source rows -> `position` (struct group, topic, partition, offset, timestamp; null
    for a record that reports none), `malformed` (a record with a value and no position: a
    tombstone only forgets its key, so it is neither), and the record's place in the topic."""
    jvm = jvm_view()
    position = JvmColumn(jvm.io.drstream.spark.GroupPositions.of(F.col("key")._jc, F.col("value")._jc))
    return records.select(
        position.alias("position"),
        F.col("partition").alias("record_partition"),
        F.col("offset").alias("record_offset"),
        F.col("value").isNotNull().alias("has_value"),
    ).select("position", "record_partition", "record_offset",
             (F.col("has_value") & F.col("position").isNull()).alias("malformed"))


def newest_positions(positions: DataFrame) -> DataFrame:
    """One row per group, topic and partition with its newest position: the record written last,
    as a key's records all go to one partition of the topic, in order. The records that report no
    position gather in one row with a null key and position, whose `malformed` counts the
    malformed among them (0 elsewhere)."""
    order = F.struct("record_partition", "record_offset")
    return positions.groupBy(*(F.col("position")[k].alias(k) for k in KEY)).agg(
        F.max_by("position", order).alias("position"),
        F.count_if("malformed").alias("malformed"),
    )
