"""What the offset index's upkeep costs, from the driver through delta-rs and through Spark.

    python -m bench.index_upkeep [--partitions 1000] [--rows 10000,100000] [--repeats 3]

Builds an index table the way a flow appends to it (delta-rs, an append of a few hundred rows
every 30 s of copying: each of `partitions` partitions' growing run republished, with a break in
the copy now and then), then keeps it (`kept_runs`: merged, retention followed) once through
delta-rs, as the flow's table thread does, and once through Spark's rewrite, the fallback for
locations delta-rs cannot open (and the shape of the upkeep before it moved to delta-rs). Each
is repeated on a fresh copy of the table; the median is reported with the rows before and
after. Results: `bench/results/aging/index-upkeep-<UTC time>.md` and `.json`.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

from dr_stream.runtime.paths import cache_dir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "aging"


def build(path: Path, partitions: int, rows: int, seed: int = 11) -> None:
    from deltalake import write_deltalake

    from dr_stream.index.index_table import RUN_SCHEMA
    from dr_stream.runtime.delta_appends import arrow_table

    shutil.rmtree(path, ignore_errors=True)
    rng = random.Random(seed)
    starts = dict.fromkeys(range(partitions), 0)  # each partition's current run: (origin start, dest start)
    ends = dict.fromkeys(range(partitions), -1)
    shift = dict.fromkeys(range(partitions), 0)
    written, at = 0, 1_767_225_600_000
    while written < rows:
        batch = []
        for p in rng.sample(range(partitions), min(partitions, 300, rows - written)):
            if rng.random() < 0.05:  # a break: the next run starts elsewhere on the destination
                shift[p] += rng.randint(1, 5)
                starts[p] = ends[p] + 1
            ends[p] += rng.randint(1, 500)
            at += 1
            origin_start, origin_end = starts[p], ends[p]
            batch.append(("c1", "orders", p, "orders", p, origin_start, origin_end, origin_start + shift[p],
                          origin_end + shift[p], origin_end - origin_start + 1, at, at, at, written))
        write_deltalake(str(path), arrow_table(RUN_SCHEMA, batch), mode="append")
        written += len(batch)


def timed_keep(source: Path, work: Path, spark: SparkSession | None = None) -> tuple[float, int, int]:
    from dr_stream.index.index_table import RUN_SCHEMA
    from dr_stream.index.kept_runs import kept_runs_sql
    from dr_stream.runtime.delta_upkeep import rewrite, rewrite_through_spark

    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, work)
    sql = kept_runs_sql({})
    began = time.monotonic()
    if spark is None:
        done = rewrite(str(work), sql, RUN_SCHEMA.fieldNames())
    else:
        done = rewrite_through_spark(spark, str(work), sql, RUN_SCHEMA.fieldNames())
    took = time.monotonic() - began
    assert done is not None
    return took, done.rows_before, done.rows_after


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.index_upkeep", description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1_000)
    parser.add_argument("--rows", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    from dr_stream.runtime.session import spark_session

    spark = spark_session("dr-stream-bench-index-upkeep", master="local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    base = cache_dir() / "bench" / "index-upkeep"
    results = []
    try:
        for rows in (int(r) for r in args.rows.split(",")):
            table = base / f"table-{rows}"
            build(table, args.partitions, rows)
            for engine in ("delta-rs (driver)", "Spark"):
                runs = [timed_keep(table, base / "work", None if engine.startswith("delta") else spark)
                        for _ in range(args.repeats)]
                took = statistics.median(r[0] for r in runs)
                results.append({"rows": rows, "partitions": args.partitions, "engine": engine, "seconds": took,
                                "runs_s": [r[0] for r in runs], "rows_before": runs[0][1], "rows_after": runs[0][2]})
                print(f"  {rows:,} rows, {engine}: {took:.2f} s -> {runs[0][2]:,} rows", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(base, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (OUT / f"index-upkeep-{stamp}.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [f"# Offset index upkeep ({args.partitions:,} partitions)", "",
             "One upkeep (`kept_runs`: rows of one run merged, retention followed, files replaced), median of "
             f"{args.repeats} on fresh copies of a table appended the way a flow appends it.", "",
             "| rows before | rows after | engine | seconds (median) | runs |", "|---:|---:|---|---:|---|"]
    lines += [f"| {r['rows_before']:,} | {r['rows_after']:,} | {r['engine']} | {r['seconds']:.2f} | "
              f"{', '.join(f'{s:.2f}' for s in r['runs_s'])} |" for r in results]
    text = "\n".join(lines) + "\n"
    (OUT / f"index-upkeep-{stamp}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
