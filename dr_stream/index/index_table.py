"""The offset index: where each copied record landed on the destination.

A Delta table per flow at `streaming.offset_index`, readable by Spark, the notebooks and (without
a JVM) the `deltalake` package. It holds *runs* (`run_store.Run`): a stretch where origin and
destination offsets advance together, so one row stands for every record of a steady copy.
`index_feed` fills it from the runs the sink's producer publishes (`runs_topic_offset` is where
in the runs topic a row came from) and, after a crash, from the destination's own records
(`destination_tail`; `runs_topic_offset` is null there).

Below every live position the upkeep joins runs into *spans* (`spans`): a row whose `records`
is fewer than its ranges hold, placed exactly by reading a window of the destination back.

Invariants: within a run, destination offset = dest_start + (origin offset - origin_start)
for every origin offset in [origin_start, origin_end], so translation through runs is as
exact as through single records; rows may repeat or overlap (a growing run is published
again), and the upkeep (`kept_runs`, `keep`) joins rows that overlap or continue each other with
the same mapping; runs are deleted only once the destination has deleted every record they
describe (the index follows the topics' retention).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampType

from dr_stream.index.kept_runs import KEY, kept_runs_sql, merged_sql, on_destination_sql, spans_sql
from dr_stream.index.run_store import Run
from dr_stream.index.spans import MAX_SLACK, Pins
from dr_stream.runtime.delta_appends import DeltaAppends
from dr_stream.runtime.delta_upkeep import RETENTION_S, Rewritten, rewriter
from dr_stream.runtime.local_frame import local_frame
from dr_stream.runtime.step import Step

RUN_KEY = list(KEY)

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
    StructField("runs_topic_offset", LongType(), True),
])

# Runs as plain values, timestamps in epoch ms: Spark turns them into the table's timestamps.
_PLAIN = ("origin_cluster string, origin_topic string, origin_partition int, dest_topic string, dest_partition int, "
          "origin_start long, origin_end long, dest_start long, dest_end long, first_ms long, last_ms long, "
          "copied_ms long, runs_topic_offset long")


def runs_frame(spark: SparkSession, runs: list[tuple[Run, int | None]]) -> DataFrame:
    """(run, its offset in the runs topic or None) pairs -> rows of the index table."""
    rows = [(r.origin_cluster, r.origin_topic, r.origin_partition, r.dest_topic, r.dest_partition, r.origin_start,
             r.origin_end, r.dest_start, r.dest_end, r.first_timestamp, r.last_timestamp, r.copied_at, at)
            for r, at in runs]
    return local_frame(spark, rows, _PLAIN).select(
        *RUN_KEY, "origin_start", "origin_end", "dest_start", "dest_end",
        (F.col("dest_end") - F.col("dest_start") + 1).alias("records"),
        F.timestamp_millis("first_ms").alias("first_timestamp"), F.timestamp_millis("last_ms").alias("last_timestamp"),
        F.timestamp_millis("copied_ms").alias("copied_at"), "runs_topic_offset",
    )


def merge_adjacent_runs(df: DataFrame) -> DataFrame:
    """Joins runs that overlap or continue each other with the same mapping (`kept_runs`, the
    rule the table's upkeep runs, here through Spark)."""
    return df.sparkSession.sql(merged_sql("SELECT * FROM {runs}"), runs=df).select(*RUN_SCHEMA.fieldNames())


def drop_deleted_runs(log_starts: Mapping[tuple[str, int], int]) -> Step:
    """Keeps runs with at least one record still in the destination (`log_starts`: each
    destination partition's log start). Partitions missing from `log_starts` keep all their runs."""

    def step(df: DataFrame) -> DataFrame:
        return df.sparkSession.sql(on_destination_sql(log_starts, "{runs}"), runs=df)

    return step


@dataclass
class OffsetIndex:
    """The Delta table at `streaming.offset_index`."""

    spark: SparkSession
    path: str
    appends: DeltaAppends = field(default_factory=DeltaAppends)
    # replaced files and log entries kept this long (`streaming.old_versions_retention`)
    retention_s: float = RETENTION_S

    def exists(self) -> bool:
        from delta.tables import DeltaTable

        return DeltaTable.isDeltaTable(self.spark, self.path)

    def runs(self) -> DataFrame:
        if not self.exists():
            return local_frame(self.spark, [], RUN_SCHEMA)
        return self.spark.read.format("delta").load(self.path)

    def append_runs(self, runs: list[tuple[Run, int | None]]) -> None:
        """(run, its offset in the runs topic or None) pairs appended as rows, from the driver
        (`DeltaAppends`); tables written before runs_topic_offset existed gain the column."""
        rows = [(r.origin_cluster, r.origin_topic, r.origin_partition, r.dest_topic, r.dest_partition, r.origin_start,
                 r.origin_end, r.dest_start, r.dest_end, r.dest_end - r.dest_start + 1, r.first_timestamp,
                 r.last_timestamp, r.copied_at, at) for r, at in runs]
        self.appends.append(self.path, RUN_SCHEMA, rows, lambda: self.append(runs_frame(self.spark, runs)),
                            merge_schema=True)

    def append(self, runs: DataFrame) -> None:
        # mergeSchema: tables written before runs_topic_offset existed gain the column.
        (runs.select(*RUN_SCHEMA.fieldNames()).write.format("delta").mode("append")
         .option("mergeSchema", "true").save(self.path))

    def keep(self, log_starts: Mapping[tuple[str, int], int], origin_cluster: str | None = None,
             floors: Mapping[tuple[str, int], int] | None = None, max_slack: int = MAX_SLACK,
             pins: Pins | None = None) -> Rewritten | None:
        """Rewrites the table to what it keeps (`kept_runs`; with `floors`, `origin_cluster`'s rows
        below them joined into spans, but for those `pins` pin) and deletes the files that
        replaced (`runtime.delta_upkeep`): through delta-rs from the driver, through Spark where
        delta-rs cannot open the table. None when there is no table yet."""
        kept = kept_runs_sql(log_starts)
        if origin_cluster is not None and floors:
            kept = spans_sql(kept, origin_cluster, floors, max_slack, pins)
        return rewriter(lambda: self.spark, self.retention_s)(self.path, kept, RUN_SCHEMA.fieldNames())

    def size_in_bytes(self) -> int:
        if not self.exists():
            return 0
        detail = self.spark.sql(f"DESCRIBE DETAIL delta.`{self.path}`").first()
        return int(detail["sizeInBytes"]) if detail is not None else 0
