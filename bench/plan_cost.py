"""How long Spark takes to plan one micro-batch of dr-stream's record path, against the plain copy's.

    python -m bench.plan_cost [--plans 300]

A micro-batch query is analyzed, optimized and planned again for every batch, so what its plan
holds costs per batch, whatever the batch carries. This plans the replicate query's record path
(`record_path.prepare`, a flow with provenance and no restart marks, whose rows dr-stream's sink
reads as they are) and the plain Spark copy's projection over the same cached row in the Kafka
source's columns (`bench.record_path_cost`'s rows: a cached relation, which the optimizer cannot
fold away as it could literal rows), from the analyzed plan to the executed one, `--plans` times
each after as many to warm the JIT up, in one local Spark session, and prints milliseconds per
plan and the optimized plans.
"""

from __future__ import annotations

import argparse
import sys
import time

from pyspark.sql import DataFrame

from bench.record_path_cost import PLAN, SINK_COLUMNS, source_rows
from dr_stream.replication.record_path import prepare
from dr_stream.runtime.session import spark_session


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
        rows = source_rows(spark, 1)
        paths = {"plain Spark": rows.select(*SINK_COLUMNS),
                 "dr-stream": rows.transform(prepare(PLAN))}
        for name, df in paths.items():
            print(f"{name}: {ms_per_plan(df, args.plans):.2f} ms per plan ({args.plans} plans)", flush=True)
            print(df._jdf.queryExecution().optimizedPlan().toString(), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
