"""Small driver-side data as a DataFrame built inside the JVM.

`spark.createDataFrame(list)` ships the rows through a Python RDD, and every task that reads
one starts a Python worker (about 50 MiB each, up to one per task slot: 700 MiB for a real-time
flow with 13 partitions, for a Delta append of a few runs). Here the rows travel as one JSON
document that Spark parses itself: no Python worker, one partition.

The documents are rows of a local dataset, not a literal in the plan: Spark keeps each query's
plan text (up to `spark.sql.ui.retainedExecutions` of them, the UI on or off), and a literal of
50,000 translations made that text 16 MiB a query (1,000 partitions x 5,000 groups: 166 MiB of
the driver's heap held by plan strings). Each document stays under `DOCUMENT_CHARS`: one string
of 50 MiB (a restart's first translation-log append) took about four times that in the JVM
while py4j and Spark copied it, in arrays too large for the collector's regions, and that was
the flow's peak RSS.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.classic.dataframe import DataFrame as JvmFrame
from pyspark.sql.types import ArrayType, StructType

from dr_stream.runtime.jvm_classes import jvm_view

# Below half of G1's smallest region (1 MiB; a driver under spark-submit runs Java's default, G1): a
# document's string is an ordinary allocation, not a humongous one.
DOCUMENT_CHARS = 200_000


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
    jvm = jvm_view(spark.sparkContext)
    documents = jvm.java.util.ArrayList()
    for document in json_documents([dict(zip(names, row, strict=True)) for row in rows]):
        documents.add(document)
    frame = JvmFrame(spark._jsparkSession.createDataset(documents, jvm.org.apache.spark.sql.Encoders.STRING()).toDF(),
                     spark)
    parsed = F.from_json(F.col("value"), _array_of(schema))
    return frame.select(F.explode(parsed).alias("r")).select(*(F.col(f"r.`{n}`").alias(n) for n in names))


def json_documents(rows: Sequence[dict[str, Any]], limit: int = DOCUMENT_CHARS) -> list[str]:
    """`rows` as JSON arrays of at most `limit` characters each (a longer row alone), at least one."""
    documents: list[str] = []
    part: list[str] = []
    size = 2
    for row in rows:
        text = json.dumps(row)
        if part and size + len(text) + 1 > limit:
            documents.append("[" + ",".join(part) + "]")
            part, size = [], 2
        part.append(text)
        size += len(text) + 1
    documents.append("[" + ",".join(part) + "]")
    return documents
