"""`python -m bench.record_path_cost`: what each step dr-stream adds to Spark's record path costs.

    python -m bench.record_path_cost [--records 1000000] [--repeat 5]

No Kafka: a million source rows as Spark's Kafka source gives them (1 KiB value, a key, two
headers) are cached in memory, then each variant of the record path is run over them into
Spark's `noop` sink, which consumes every row and writes nothing. A variant's cost is the JVM's
CPU time for the run, less the bare scan's (the cached rows read and dropped), per 1,000
records, the median of `--repeat` runs after one warm-up each. The variants go from the plain
Spark copy's projection (topic, key, value, headers, partition: what Spark's sink takes) to
dr-stream's path (`record_path.prepare`, whose rows dr-stream's sink reads as they are). The
sinks, the producer and the provenance header are not here: `make bench` and `make profile`
measure them with Kafka.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.replicators import CostSampler
from dr_stream.replication.record_path import ReplicationPlan, prepare
from dr_stream.runtime.session import spark_session

Variant = Callable[[DataFrame], DataFrame]
PLAN = ReplicationPlan("source-cluster-id", "destination-cluster-id")
SINK_COLUMNS = ("topic", "key", "value", "headers", "partition")


def source_rows(spark: SparkSession, records: int, value_bytes: int = 1024) -> DataFrame:
    """Rows in the Kafka source's schema, cached: the bench's catch-up records."""
    value = F.concat(F.col("id").cast("string").cast("binary"), F.lit(bytes(value_bytes - 8)))
    headers = F.array(F.struct(F.lit("trace-id").alias("key"), F.lit(b"bench-trace-0123456789").alias("value")),
                      F.struct(F.lit("source").alias("key"), F.lit(b"bench").alias("value")))
    rows = spark.range(records, numPartitions=6).select(
        F.concat(F.lit("key-"), (F.col("id") % 10_000).cast("string")).cast("binary").alias("key"),
        F.substring(value, 1, value_bytes).alias("value"),
        F.lit("bench.catchup").alias("topic"),
        (F.col("id") % 6).cast("int").alias("partition"),
        F.col("id").alias("offset"),
        F.current_timestamp().alias("timestamp"),
        F.lit(0).alias("timestampType"),
        headers.alias("headers"),
    ).cache()
    rows.count()
    return rows


VARIANTS: dict[str, Variant] = {
    "scan only (subtracted from the others)": lambda df: df.select(F.col("partition")),
    "plain Spark: the sink's columns": lambda df: df.select(*SINK_COLUMNS),
    # dr-stream's sink reads the rows as the source gave them: its work is in `make profile`
    "dr-stream: prepare (counts, cycle filter, resume filter)": prepare(PLAN),
}


def jvm_cpu_ms() -> float:
    """CPU-ms of this process and the Spark JVM it started (the driver only waits meanwhile)."""
    sampler = CostSampler(os.getpid())
    sampler.sample()
    return sampler.cpu_seconds * 1000


def cost_ms(spark: SparkSession, rows: DataFrame, variant: Variant, repeat: int) -> list[float]:
    """CPU-ms of each run of `variant` over `rows` into the noop sink, after one warm-up run."""
    out = []
    for i in range(repeat + 1):
        began = jvm_cpu_ms()
        rows.transform(variant).write.format("noop").mode("overwrite").save()
        if i:
            out.append(jvm_cpu_ms() - began)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.record_path_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    spark = spark_session("record-path-cost")
    rows = source_rows(spark, args.records)
    per_k = 1000 / args.records
    costs = {name: statistics.median(cost_ms(spark, rows, v, args.repeat)) for name, v in VARIANTS.items()}
    scan = costs.pop("scan only (subtracted from the others)")
    print(f"JVM CPU-ms per 1,000 records, {args.records:,} records, median of {args.repeat}; "
          f"bare scan {scan * per_k:.2f} subtracted")
    for name, ms in costs.items():
        print(f"  {(ms - scan) * per_k:6.2f}  {name}")
    spark.stop()
    return 0



if __name__ == "__main__":
    sys.exit(main())
