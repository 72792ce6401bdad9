"""How long Spark takes to plan one micro-batch of dr-stream's record path, against the plain copy's.

    python -m bench.plan_cost [--plans 300]

A micro-batch query is analyzed, optimized and planned again for every batch, so what its plan
holds costs per batch, whatever the batch carries. This plans the replicate query's record path
(`record_path.prepare` then `to_sink_rows`, a flow with provenance and no restart marks) and the
plain Spark copy's projection over the same one-row relation of the Kafka source's columns, from
the analyzed plan to the executed one, `--plans` times each after as many to warm the JIT up, in
one local Spark session, and prints milliseconds per plan and the optimized plans. The two rules
that would fold a one-row relation away at planning time are turned off, as a stream has no rows
to fold.
"""

from __future__ import annotations

import argparse
import sys
import time

from pyspark.sql import DataFrame
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from dr_stream.replication.record_path import ReplicationPlan, prepare, to_sink_rows
from dr_stream.runtime.session import spark_session

KAFKA_SOURCE = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
    StructField("partition", IntegerType()), StructField("offset", LongType()),
    StructField("timestamp", TimestampType()), StructField("timestampType", IntegerType()),
    StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                 StructField("value", BinaryType())]))),
])
FOLDING_RULES = ("org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation,"
                 "org.apache.spark.sql.catalyst.optimizer.PropagateEmptyRelation")


def ms_per_plan(df: DataFrame, plans: int) -> float:
    """Wall milliseconds from a new analyzed plan of `df` to its executed plan, after as many to warm up."""
    def plan_all() -> float:
        began = time.monotonic()
        for _ in range(plans):
            df._jdf.alias("batch").queryExecution().executedPlan()
        return (time.monotonic() - began) / plans * 1000

    plan_all()
    return plan_all()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.plan_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=300)
    args = parser.parse_args(argv)
    spark = spark_session("dr-stream-plan-cost", master="local[1]")
    try:
        spark.sparkContext.setLogLevel("ERROR")
        spark.conf.set("spark.sql.optimizer.excludedRules", FOLDING_RULES)
        rows = spark.createDataFrame([(b"k", b"v", "t", 0, 1, None, 0, [])], KAFKA_SOURCE)
        plan = ReplicationPlan("source-cluster-id", "destination-cluster-id")
        paths = {"plain Spark": rows.select("topic", "key", "value", "headers", "partition"),
                 "dr-stream": rows.transform(prepare(plan)).transform(to_sink_rows(plan))}
        for name, df in paths.items():
            print(f"{name}: {ms_per_plan(df, args.plans):.2f} ms per plan ({args.plans} plans)", flush=True)
            print(df._jdf.queryExecution().optimizedPlan().toString(), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
