"""Small driver-side data becomes a DataFrame without a Python worker."""

from __future__ import annotations

from chispa import assert_df_equality
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from dr_stream.local_frame import local_frame


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


def test_the_rows_come_from_a_literal_not_from_a_python_rdd(spark):
    def plan(frame) -> str:
        return frame._jdf.queryExecution().executedPlan().toString()

    ddl = "topic string, partition int, offset long"
    assert "ExistingRDD" in plan(spark.createDataFrame([("a", 1, 2)], ddl))  # what a Python worker would read
    assert "ExistingRDD" not in plan(local_frame(spark, [("a", 1, 2)], ddl))
