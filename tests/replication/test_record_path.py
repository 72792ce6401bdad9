"""The record path's DataFrame steps, one at a time, with chispa."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from dr_stream.core.config import FilterOverride
from dr_stream.replication.record_counts import RecordCounts
from dr_stream.replication.record_path import (
    CYCLE_COLUMN,
    ReplicationPlan,
    cycle_bits,
    mark_cycles,
    prepare,
)
from dr_stream.replication.resume import Resume
from dr_stream.runtime.provenance_columns import HEADERS_TYPE, provenance_entries
from tests.kafka_tools import wait_until

KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
    StructField("headers", HEADERS_TYPE),
])
TS = dt.datetime(2010, 1, 1, tzinfo=dt.UTC).replace(tzinfo=None)


def prov(cluster, topic="orders", partition=0, offset=7, timestamp=1000) -> tuple[str, bytes]:
    body = {"cluster": cluster, "topic": topic, "partition": partition, "offset": offset, "timestamp": timestamp}
    return ("__replicator_id", json.dumps(body).encode())


def kafka_rows(spark, *headers_per_row, topic="orders"):
    rows = [
        (f"k{i}".encode(), f"v{i}".encode(), topic, 1, 100 + i, TS, 0, [list(h) for h in headers] if headers else None)
        for i, headers in enumerate(headers_per_row)
    ]
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


pytestmark = pytest.mark.usefixtures("spark")


def test_provenance_entries_keep_valid_entries_in_hop_order_and_the_rule_flags_the_malformed(spark):
    df = kafka_rows(
        spark,
        [prov("A", offset=1), ("other", b"x"), prov("B", offset=2)],
        [("__replicator_id", b"{not json"), prov("A")],
        [("__replicator_id", b'{"cluster": "A", "partition": "x"}')],
        None,
    )
    got = df.select(F.transform(provenance_entries("__replicator_id"), lambda p: p["cluster"]).alias("clusters"),
                    (cycle_bits(ReplicationPlan("SRC", "DEST")).bitwiseAND(F.lit(2)) > 0).alias("malformed"))
    expected = spark.createDataFrame(
        [(["A", "B"], False), (["A"], True), ([], True), ([], False)],
        StructType([StructField("clusters", ArrayType(StringType())), StructField("malformed", BooleanType())]),
    )
    assert_df_equality(got, expected, ignore_nullable=True)


@pytest.mark.parametrize(
    ("header", "overrides", "is_cycle"),
    [
        (prov("DEST", topic="orders"), (), True),  # came from the destination topic
        (prov("DEST", topic="other"), (), False),  # from the destination cluster, another topic
        (prov("THIRD", topic="orders"), (), False),
        (prov("DEST", topic="orders", timestamp=500), (FilterOverride("DE.*", "orders", 0, 1000),), False),
        (prov("DEST", topic="orders", timestamp=5000), (FilterOverride("DE.*", "orders", 0, 1000),), True),
        (prov("DEST", topic="orders"), (FilterOverride("DEST", "orders", None, None),), False),
        (("__replicator_id", b"garbage"), (), False),  # malformed = no provenance
    ],
)
def test_mark_cycles_applies_the_cycle_rule_and_its_overrides(spark, header, overrides, is_cycle):
    plan = ReplicationPlan("SRC", "DEST", filter_overrides=overrides)
    df = kafka_rows(spark, [header]).transform(mark_cycles(plan))
    assert df.select(CYCLE_COLUMN).first()[0] is is_cycle


@pytest.mark.parametrize(
    ("value", "malformed"),
    [
        (b'{"cluster":"A","topic":"t","partition":1,"offset":2,"timestamp":3}', False),
        (b' { "offset" : 2 , "partition":1, "topic":"t", "cluster":"A", "extra": {"x": [1, "}"]} } ', False),
        (b'{"cluster":"A","topic":"t","partition":1,"offset":2}', False),  # no copy time: still an entry
        (b'{"cluster":"A","topic":"t","partition":1,"offset":2,"timestamp":null}', False),
        (b"{not json", True),
        (b'{"cluster": "A", "partition": "x"}', True),
        (b'{"cluster":"A","topic":"t","partition":1,"offset":2.5}', True),
        (b'{"cluster":"A","topic":"t","partition":4294967296,"offset":2}', True),  # beyond an int
        (b'{"cluster":"A","topic":"t","partition":1,"offset":2} trailing', True),
        (b"\xff\xfe", True),
        (b"", True),
    ],
)
def test_a_provenance_value_that_is_no_entry_is_malformed_and_never_fails_the_row(spark, value, malformed):
    plan = ReplicationPlan("SRC", "DEST")
    bits = kafka_rows(spark, [("__replicator_id", value)]).select(cycle_bits(plan)).first()[0]
    assert bits == (2 if malformed else 0)


@pytest.mark.parametrize(
    ("headers", "overrides", "copied"),
    [
        ([], (), True),  # produced on the source itself
        ([prov("THIRD")], (), False),
        ([prov("THIRD"), prov("SRC")], (), False),
        ([prov("THIRD")], (FilterOverride("THIRD", "orders", None, None),), True),
        ([("__replicator_id", b"garbage")], (), True),  # malformed = no provenance
    ],
)
def test_a_flow_that_does_not_forward_copies_only_the_sources_own_records(spark, headers, overrides, copied):
    plan = ReplicationPlan("SRC", "DEST", filter_overrides=overrides, forward=False)
    df = kafka_rows(spark, headers).transform(mark_cycles(plan))
    assert df.select(CYCLE_COLUMN).first()[0] is (not copied)


def test_a_record_with_one_entry_from_the_destination_among_several_hops_is_a_cycle(spark):
    plan = ReplicationPlan("SRC", "DEST")
    df = kafka_rows(spark, [prov("THIRD"), ("app", b"1"), prov("DEST"), ("__replicator_id", b"junk")])
    assert df.select(cycle_bits(plan)).first()[0] == 3


def test_the_record_path_is_one_filter_in_one_stage_of_generated_code_and_rewrites_no_row(spark):
    """The rules filter the source's rows as they are, counting as they decide, in one filter
    compiled into one stage (marked `*(n)`): an operator Spark cannot compile would build its own
    projection for every task. No projection rewrites the row: dr-stream's sink reads each as the
    Kafka source gave it."""
    plan = ReplicationPlan("SRC", "DEST")
    resume = Resume({("orders", 1): 101}, {("orders", 1): 50})
    counts = RecordCounts.register(spark, "one-stage")
    df = kafka_rows(spark, [prov("DEST")], None, [prov("THIRD")]).transform(prepare(plan, resume, counts))
    executed = df._jdf.queryExecution().executedPlan().toString().splitlines()
    assert not [line for line in executed if "Project [" in line], executed
    filters = [line.strip(" +-:") for line in executed if "Filter " in line]
    assert len(filters) == 1 and filters[0].startswith("*("), executed
    assert not [line for line in executed if "CollectMetrics" in line], executed
    assert df.columns == [f.name for f in KAFKA_SCHEMA.fields]
    assert [r["value"] for r in df.collect()] == [b"v2"]


def test_the_record_path_is_compiled_once_not_once_per_micro_batch(spark, tmp_path):
    """Nothing of a batch (its time, its id) is written into the generated code as a constant: a
    stream's batches after the first compile nothing."""
    compilations = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    source = spark.readStream.format("rate").option("rowsPerSecond", 200).load().select(
        F.lit(b"k").alias("key"), F.lit(b"v").alias("value"), F.lit("orders").alias("topic"),
        F.lit(0).alias("partition"), F.col("value").alias("offset"), F.col("timestamp"),
        F.lit(0).alias("timestampType"), F.lit(None).cast(HEADERS_TYPE).alias("headers"))
    plan = ReplicationPlan("SRC", "DEST")
    query = (source.transform(prepare(plan))
             .writeStream.format("noop").trigger(processingTime="100 milliseconds")
             .option("checkpointLocation", str(tmp_path)).start())
    try:
        assert wait_until(lambda: (query.lastProgress or {}).get("numInputRows", 0) > 0, 60)
        first, compiled = query.lastProgress["batchId"], compilations.getCount()
        assert wait_until(lambda: query.lastProgress["batchId"] >= first + 4, 60)
        assert compilations.getCount() == compiled
    finally:
        query.stop()


def test_the_rules_count_each_record_they_drop_or_flag_once_and_hand_each_count_out_once(spark):
    plan = ReplicationPlan("SRC", "DEST")
    counts = RecordCounts.register(spark, "counting")
    # marks: at or below 102 copied already, at or below 101 left out at failback
    resume = Resume({("orders", 1): 102}, {("orders", 1): 101})
    rows = kafka_rows(spark, [prov("DEST")], [("__replicator_id", b"junk")], None, None, None, [prov("DEST")])
    # 100: came back (also below the mark: counted once, as came back); 101: malformed, left out;
    # 102: already copied; 103 and 104 kept; 105: came back
    kept = rows.repartition(2).transform(prepare(plan, resume, counts)).select("offset").collect()
    assert sorted(r["offset"] for r in kept) == [103, 104]
    assert counts.taken() == {"came_from_destination": 2, "malformed_provenance": 1, "already_copied": 1,
                              "left_out": 1, "unconfirmed_cycle": 0, "came_from_destination_unchecked": 0}
    assert set(counts.taken().values()) == {0}


def test_prepare_drops_records_that_came_from_the_destination_and_keeps_the_rest(spark):
    plan = ReplicationPlan("SRC", "DEST")
    df = kafka_rows(spark, [prov("DEST")], None, [prov("THIRD")]).transform(prepare(plan))
    assert sorted(r["value"] for r in df.select("value").collect()) == [b"v1", b"v2"]
