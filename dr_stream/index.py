"""The offset index (DESIGN 1.7): where each copied record landed on the destination.

A streaming query reads the destination's replicated topics back, keeps the records whose
newest provenance header names this flow's source cluster, and appends *runs* to a Delta
table: a run is a stretch where origin and destination offsets advance together, so one
row stands for every record of a steady copy between two micro-batches.

Invariants: within a run, destination offset = dest_start + (origin offset - origin_start)
for every origin offset in [origin_start, origin_end], so translation through runs is as
exact as through single records; a run is only merged with the next one when both offset
ranges continue without a gap; runs are deleted only once the destination has deleted every
record they describe (the index follows the topics' retention).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampType

from dr_stream.policy import TopicRenamer
from dr_stream.provenance import PROVENANCE, with_provenance

RUN_KEY = ["origin_cluster", "origin_topic", "origin_partition", "dest_topic", "dest_partition"]

RUN_SCHEMA = StructType([
    StructField("origin_cluster", StringType(), False),
    StructField("origin_topic", StringType(), False),
    StructField("origin_partition", IntegerType(), False),
    StructField("dest_topic", StringType(), False),
    StructField("dest_partition", IntegerType(), False),
    StructField("origin_start", LongType(), False),
    StructField("origin_end", LongType(), False),
    StructField("dest_start", LongType(), False),
    StructField("dest_end", LongType(), False),
    StructField("records", LongType(), False),
    StructField("first_timestamp", TimestampType(), True),
    StructField("last_timestamp", TimestampType(), True),
    StructField("copied_at", TimestampType(), True),
])

Step = Callable[[DataFrame], DataFrame]


def copied_records(source_cluster_id: str, header: str, renamer: TopicRenamer) -> Step:
    """Destination Kafka rows -> one row per record this flow copied, with its origin.

    A record belongs to the flow when its newest provenance entry names the source cluster and
    the destination topic is that entry's topic renamed; records produced on the destination
    itself, or copied there by another flow, are not this flow's and are left out.
    """

    def step(df: DataFrame) -> DataFrame:
        newest = F.try_element_at(F.col(PROVENANCE), F.lit(-1))
        return (
            df.transform(with_provenance(header))
            .withColumn("_newest", newest)
            .where(
                (F.col("_newest.cluster") == F.lit(source_cluster_id))
                & (renamer.remote_topic_column(F.col("_newest.topic")) == F.col("topic"))
            )
            .select(
                F.col("_newest.cluster").alias("origin_cluster"),
                F.col("_newest.topic").alias("origin_topic"),
                F.col("_newest.partition").alias("origin_partition"),
                F.col("topic").alias("dest_topic"),
                F.col("partition").alias("dest_partition"),
                F.col("_newest.offset").alias("origin_offset"),
                F.col("offset").alias("dest_offset"),
                F.col("timestamp").alias("origin_timestamp"),
                F.timestamp_millis(F.col("_newest.timestamp")).alias("copied_at"),
            )
        )

    return step


def single_record_runs(df: DataFrame) -> DataFrame:
    """Copied records -> one run of length one each."""
    return df.select(
        *RUN_KEY,
        F.col("origin_offset").alias("origin_start"),
        F.col("origin_offset").alias("origin_end"),
        F.col("dest_offset").alias("dest_start"),
        F.col("dest_offset").alias("dest_end"),
        F.lit(1).cast("long").alias("records"),
        F.col("origin_timestamp").alias("first_timestamp"),
        F.col("origin_timestamp").alias("last_timestamp"),
        F.col("copied_at"),
    )


def merge_adjacent_runs(df: DataFrame) -> DataFrame:
    """Joins runs that continue each other in both offset ranges (gaps-and-islands)."""
    ordered = Window.partitionBy(*RUN_KEY).orderBy("dest_start", "origin_start")
    continues = (
        (F.col("dest_start") == F.lag("dest_end").over(ordered) + 1)
        & (F.col("origin_start") == F.lag("origin_end").over(ordered) + 1)
    )
    island = F.sum(F.when(continues, 0).otherwise(1)).over(
        ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        df.withColumn("_island", island)
        .groupBy(*RUN_KEY, "_island")
        .agg(
            F.min("origin_start").alias("origin_start"),
            F.max("origin_end").alias("origin_end"),
            F.min("dest_start").alias("dest_start"),
            F.max("dest_end").alias("dest_end"),
            F.sum("records").alias("records"),
            F.min("first_timestamp").alias("first_timestamp"),
            F.max("last_timestamp").alias("last_timestamp"),
            F.max("copied_at").alias("copied_at"),
        )
        .drop("_island")
    )


def to_runs(df: DataFrame) -> DataFrame:
    return df.transform(single_record_runs).transform(merge_adjacent_runs)


def drop_deleted_runs(log_starts: DataFrame) -> Step:
    """Keeps runs with at least one record still in the destination (`log_starts`: dest_topic,
    dest_partition, log_start). Partitions missing from `log_starts` keep all their runs."""

    def step(df: DataFrame) -> DataFrame:
        return (
            df.join(F.broadcast(log_starts), on=["dest_topic", "dest_partition"], how="left")
            .where(F.col("log_start").isNull() | (F.col("dest_end") >= F.col("log_start")))
            .drop("log_start")
        )

    return step


@dataclass
class OffsetIndex:
    """The Delta table at `streaming.offset_index`."""

    spark: SparkSession
    path: str

    def exists(self) -> bool:
        from delta.tables import DeltaTable

        return DeltaTable.isDeltaTable(self.spark, self.path)

    def runs(self) -> DataFrame:
        if not self.exists():
            return self.spark.createDataFrame([], RUN_SCHEMA)
        return self.spark.read.format("delta").load(self.path)

    def append(self, runs: DataFrame) -> None:
        runs.select(*RUN_SCHEMA.fieldNames()).write.format("delta").mode("append").save(self.path)

    def rewrite(self, runs: DataFrame) -> None:
        runs.select(*RUN_SCHEMA.fieldNames()).write.format("delta").mode("overwrite").save(self.path)

    def size_in_bytes(self) -> int:
        if not self.exists():
            return 0
        return int(self.spark.sql(f"DESCRIBE DETAIL delta.`{self.path}`").first()["sizeInBytes"])


@dataclass
class OffsetIndexer:
    """The offset-index query of one flow, plus the periodic clean-up of its table.

    `on_advanced` runs after every append (the translator re-translates what was waiting for it).
    """

    spark: SparkSession
    index: OffsetIndex
    kafka_options: dict[str, str]
    source_cluster_id: str
    header: str
    renamer: TopicRenamer
    query_name: str
    checkpoint: str
    trigger: str
    log_starts: Callable[[], list[tuple[str, int, int]]]
    on_advanced: Callable[[], None] = lambda: None
    log: Callable[[str], None] = print
    maintenance_every_s: float = 60.0
    _last_maintenance: float = field(default_factory=time.monotonic)
    # Held while appending and while rewriting: a rewrite that missed a concurrent append
    # would drop that append's runs from the table.
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def _index_batch(self, batch: DataFrame, batch_id: int) -> None:
        runs = batch.transform(copied_records(self.source_cluster_id, self.header, self.renamer)).transform(to_runs)
        runs = runs.persist()
        try:
            appended = runs.count() > 0
            if appended:
                with self._lock:
                    self.index.append(runs)
        finally:
            runs.unpersist()
        if appended:
            self.on_advanced()
        if time.monotonic() - self._last_maintenance >= self.maintenance_every_s:
            self.maintain()

    def maintain(self) -> None:
        """Deletes runs whose records retention removed, and merges runs split by batch boundaries."""
        with self._lock:
            self._last_maintenance = time.monotonic()
            if not self.index.exists():
                return
            before = self.index.runs().count()
            starts = self.spark.createDataFrame(
                self.log_starts(), "dest_topic string, dest_partition int, log_start long"
            )
            kept = self.index.runs().transform(drop_deleted_runs(starts))
            merged = kept.transform(merge_adjacent_runs).localCheckpoint()
            after = merged.count()
            if after != before:
                self.index.rewrite(merged)
                self.log(f"offset index: {before} runs -> {after} (merged adjacent runs, dropped runs "
                         "whose records the destination deleted)")

    def start(self) -> StreamingQuery:
        options = {**self.kafka_options, "includeHeaders": "true", "startingOffsets": "earliest"}
        return (
            self.spark.readStream.format("kafka").options(**options).load()
            .writeStream.queryName(self.query_name)
            .foreachBatch(self._index_batch)
            .option("checkpointLocation", self.checkpoint)
            .trigger(processingTime=self.trigger)
            .start()
        )
