"""The record of every translation a flow made: a Delta table at `streaming.translations`.

`status` and the notebooks read it, and `failover` takes from it each group's last known
source position when the source cluster is gone. A row is written when a translation or
its action changes, not on every pass.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from dr_stream.local_frame import local_frame
from dr_stream.offsets.translation import Translation

SCHEMA = StructType([
    StructField("group", StringType(), False),
    StructField("topic", StringType(), False),
    StructField("partition", IntegerType(), False),
    StructField("source_offset", LongType(), False),
    StructField("source_timestamp", LongType(), True),
    StructField("dest_topic", StringType(), False),
    StructField("dest_partition", IntegerType(), False),
    StructField("offset", LongType(), True),
    StructField("method", StringType(), False),
    StructField("note", StringType(), True),
    StructField("clamped", BooleanType(), False),
    StructField("log_start", LongType(), True),
    StructField("log_end", LongType(), True),
    StructField("last_copied", LongType(), True),
    StructField("source_log_end", LongType(), True),
    StructField("action", StringType(), True),
    StructField("translated_at", TimestampType(), False),
])


class TranslationLog:
    def __init__(self, spark: SparkSession, path: str) -> None:
        self.spark = spark
        self.path = path

    def exists(self) -> bool:
        from delta.tables import DeltaTable

        return DeltaTable.isDeltaTable(self.spark, self.path)

    def append(self, rows: list[tuple[Translation, str]]) -> None:
        if not rows:
            return
        # Attributes read directly: `asdict` deep-copies every row, and a round can hold 50,000.
        names = SCHEMA.fieldNames()
        records = [tuple(action if f == "action" else getattr(t, f) for f in names) for t, action in rows]
        # translated_at travels as epoch ms (JSON has no timestamps) and becomes one here.
        plain = StructType([StructField(f.name, LongType()) if f.name == "translated_at" else f for f in SCHEMA])
        frame = local_frame(self.spark, records, plain)
        frame = frame.withColumn("translated_at", F.timestamp_millis("translated_at"))
        frame.write.format("delta").mode("append").save(self.path)

    def history(self) -> DataFrame:
        if not self.exists():
            return local_frame(self.spark, [], SCHEMA)
        return self.spark.read.format("delta").load(self.path)

    def latest(self) -> DataFrame:
        """The newest row per (group, topic, partition)."""
        newest = Window.partitionBy("group", "topic", "partition").orderBy(F.col("translated_at").desc())
        return self.history().withColumn("_n", F.row_number().over(newest)).where("_n = 1").drop("_n")

    def last_source_ends(self) -> dict[tuple[str, int], int]:
        """The newest source log end recorded per source partition."""
        rows = self.history().where("source_log_end IS NOT NULL").groupBy("topic", "partition").agg(
            F.max_by("source_log_end", "translated_at").alias("end")).collect()
        return {(r.topic, r.partition): r.end for r in rows}
