"""Small driver-side data becomes a DataFrame without a Python worker."""

from __future__ import annotations

import json

from chispa import assert_df_equality
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from dr_stream.runtime.local_frame import json_documents, local_frame


def test_rows_keep_their_values_types_and_nulls(spark):
    got = local_frame(spark, [("t", 0, 2**40), ("u:1", 3, None)], "topic string, partition int, offset long")
    expected = spark.createDataFrame([("t", 0, 2**40), ("u:1", 3, None)], "topic string, partition int, offset long")
    assert_df_equality(got, expected, ignore_nullable=True)


def test_a_struct_schema_and_no_rows_give_an_empty_frame_of_that_schema(spark):
    schema = StructType([StructField("group", StringType()), StructField("partition", IntegerType()),
                         StructField("offset", LongType())])
    got = local_frame(spark, [], schema)
    assert got.count() == 0 and got.schema.fieldNames() == ["group", "partition", "offset"]
    assert [f.dataType for f in got.schema] == [StringType(), IntegerType(), LongType()]


def plan(frame) -> str:
    return frame._jdf.queryExecution().executedPlan().toString()


def test_the_rows_come_from_the_jvm_not_from_a_python_rdd(spark):
    ddl = "topic string, partition int, offset long"
    assert "ExistingRDD" in plan(spark.createDataFrame([("a", 1, 2)], ddl))  # what a Python worker would read
    assert "ExistingRDD" not in plan(local_frame(spark, [("a", 1, 2)], ddl))


def test_the_plan_text_does_not_grow_with_the_rows(spark):
    """Spark keeps each query's plan text: rows written into it would stay in the driver's heap."""
    ddl = "topic string, partition int, offset long"
    few, many = (local_frame(spark, [(f"topic-{i:06d}", i, i) for i in range(n)], ddl) for n in (1, 20_000))
    assert [tuple(r) for r in many.collect()] == [(f"topic-{i:06d}", i, i) for i in range(20_000)]
    assert len(plan(many)) < len(plan(few)) + 100 and "topic-019999" not in plan(many)


def test_rows_are_cut_into_documents_under_the_limit_in_order_and_a_longer_row_goes_alone():
    rows = [{"n": i, "text": "x" * (300 if i == 7 else 10)} for i in range(20)]
    documents = json_documents(rows, limit=100)
    assert all(len(d) <= 100 for d in documents if '"n": 7' not in d)
    assert [r for d in documents for r in json.loads(d)] == rows
    assert json_documents([]) == ["[]"]
