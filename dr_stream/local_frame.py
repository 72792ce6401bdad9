"""Small driver-side data as a DataFrame built inside the JVM.

`spark.createDataFrame(list)` ships the rows through a Python RDD, and every task that reads
one starts a Python worker (about 50 MiB each, up to one per task slot: 700 MiB for a real-time
flow with 13 partitions, for a Delta append of a few runs). Here the rows travel as one JSON
literal that Spark parses itself: no Python worker, one partition.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StructType


def _array_of(schema: StructType | str) -> ArrayType | str:
    if isinstance(schema, StructType):
        return ArrayType(schema)
    fields = (f.strip().split(None, 1) for f in schema.split(","))
    return "array<struct<" + ", ".join(f"`{name}`: {kind}" for name, kind in fields) + ">>"


def _names(schema: StructType | str) -> list[str]:
    if isinstance(schema, StructType):
        return schema.fieldNames()
    return [f.strip().split(None, 1)[0] for f in schema.split(",")]


def local_frame(spark: SparkSession, rows: Sequence[Sequence[Any]], schema: StructType | str) -> DataFrame:
    """`rows` (tuples of JSON values: str, int, float, bool, None) with `schema` (a StructType or
    DDL such as `"topic string, partition int"`)."""
    names = _names(schema)
    payload = json.dumps([dict(zip(names, row, strict=True)) for row in rows])
    parsed = F.from_json(F.lit(payload), _array_of(schema))
    return spark.range(1).select(F.explode(parsed).alias("r")).select(*(F.col(f"r.`{n}`").alias(n) for n in names))
