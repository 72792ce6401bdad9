"""Exactly once across crashes: find what a killed run already wrote, and skip it.

Spark's Kafka sink is at-least-once: after a crash the last micro-batch is replayed from
the checkpoint and records written before the crash would be written again. With
`preserve_partitions`, destination partition P receives this flow's records from source
partition P only, in origin-offset order (one producer per task, idempotent, ordered).
So the highest origin offset the offset index holds for P, once the index is level with the
destination (`index_feed.catch_up`), is the last record already copied, and the replayed
batch is filtered to offsets above it.

Invariant: the filter never drops a record that is not already in the destination, or that
the operator chose to leave out at failback (`left_out`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from dr_stream.step import Step

ALREADY_COPIED = "_already_copied"
COPIED_UP_TO = "_copied_up_to"
_SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField(COPIED_UP_TO, LongType()),
])

Partition = tuple[str, int]


@dataclass(frozen=True)
class ResumeMarks:
    """Per source partition, the origin offset up to which records are skipped on resume."""

    skip_through: dict[Partition, int]
    # (partition, source log end, mark): the source ends before a mark, so the topic was
    # recreated (a full restore) and the mark says nothing about today's offsets.
    recreated: tuple[tuple[Partition, int, int], ...] = ()


def resume_marks(copied: dict[Partition, int], left_out: dict[Partition, int],
                 source_ends: dict[Partition, int]) -> ResumeMarks:
    """Combines what the destination holds with what was left out at failback (the higher wins),
    and drops every mark at or beyond its partition's source log end."""
    marks = dict(copied)
    for key, offset in left_out.items():
        marks[key] = max(offset, marks.get(key, -1))
    recreated = tuple((key, source_ends.get(key, 0), offset) for key, offset in sorted(marks.items())
                      if offset >= source_ends.get(key, 0))
    for key, _, _ in recreated:
        del marks[key]
    return ResumeMarks(marks, recreated)


def drop_already_copied(spark: SparkSession, marks: dict[Partition, int]) -> Step:
    """Keeps records whose origin offset is above their partition's mark."""

    def step(df: DataFrame) -> DataFrame:
        if not marks:
            return df.withColumn(ALREADY_COPIED, F.lit(False))
        rows = [(t, p, o) for (t, p), o in sorted(marks.items())]
        frame = F.broadcast(spark.createDataFrame(rows, _SCHEMA))
        return (
            df.join(frame, on=["topic", "partition"], how="left")
            .withColumn(ALREADY_COPIED, F.coalesce(F.col("offset") <= F.col(COPIED_UP_TO), F.lit(False)))
            .drop(COPIED_UP_TO)
        )

    return step
