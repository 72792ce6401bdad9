"""What an exact lookup costs when the index keeps a span instead of its runs.

    python -m bench.span_lookup [--records 300000] [--windows 100,1000,10000,100000] [--asks 15]

A span says "the flow's copies of origin offsets [os, oe] are destination offsets [ds, de], in
origin order", without saying which origin offsets in between were not copied (a transactional
source's commit markers, a compacted source's holes). If S origin offsets of the span were not
copied, the destination offset of the first copy at or after origin offset C lies within S + 1
destination offsets: [ds + max(0, C - os - S), ds + min(C - os, de - ds + 1)]. Reading those
copies' provenance (`destination_tail.read_tail`, what a flow's start already does for the
copies no report covered) gives the exact answer. So the number of runs a span may stand for is
a trade: a span capped at S uncopied offsets costs a read of up to S + 1 records when a position
falls inside it, and replaces S runs.

This writes `records` copies to one destination partition of a real broker (dr-stream's
provenance header on each, one origin offset skipped after every transaction of 5-50 records),
then for each window size reads `asks` random windows through `read_tail` and locates a random
origin offset in each (a fresh consumer per read, as a failover's lookup would). Results:
`bench/results/aging/span-lookup-<UTC time>.md` and `.json`.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import time
from bisect import bisect_left
from pathlib import Path
from typing import Any

from bench.result_files import write_aging
from bench.workloads import bench_cluster
from dr_stream.dev.clusters import LocalCluster
from dr_stream.runtime.paths import cache_dir

HERE = Path(__file__).resolve().parent
PORT = 29894
HEADER = "__replicator_id"
SOURCE_ID = "bench-source-cluster"
RUN_BYTES = 367  # a run in the driver (bench/run_store_aging.py)
MARKERS_PER_DAY = 86_400 * 1_000  # one transaction a second on each of 1,000 partitions


def write_copies(bootstrap: str, records: int, seed: int = 5) -> list[int]:
    """Copies as the flow writes them; returns each destination offset's origin offset."""
    from dr_stream.dev.workload import create_topics
    from dr_stream.kafka import clients

    create_topics(bootstrap, {"orders": 1})
    producer = clients.producer(bench_cluster(bootstrap), {"linger.ms": 50})
    rng, origin, origins = random.Random(seed), 0, []
    left = rng.randint(5, 50)
    value = b"x" * 100
    try:
        for _ in range(records):
            entry = {"cluster": SOURCE_ID, "topic": "orders", "partition": 0, "offset": origin, "timestamp": 0}
            headers: list[tuple[str, str | bytes | None]] = [(HEADER, json.dumps(entry).encode())]
            try:
                producer.produce("orders", value, partition=0, headers=headers)
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(1)
                producer.produce("orders", value, partition=0, headers=headers)
            origins.append(origin)
            origin += 1
            left -= 1
            if left == 0:  # the transaction's commit marker takes an origin offset
                origin, left = origin + 1, rng.randint(5, 50)
            if len(origins) % 10_000 == 0:
                producer.poll(0)
        producer.flush(120)
    finally:
        producer.close()
    return origins


def lookups(bootstrap: str, origins: list[int], window: int, asks: int, seed: int = 11) -> dict[str, Any]:
    from dr_stream.core.policy import TopicRenamer
    from dr_stream.index.destination_tail import read_tail
    from dr_stream.index.run_store import RunStore
    from dr_stream.kafka.cluster_context import ClusterContext

    rng = random.Random(seed + window)
    cluster = ClusterContext(bench_cluster(bootstrap))
    seconds, found = [], 0
    for _ in range(asks):
        first = rng.randrange(0, len(origins) - window)
        # any origin offset the window spans, a marker's too: its answer is the next copy
        wanted = rng.randint(origins[first], origins[first + window - 1])
        began = time.perf_counter()
        runs = read_tail(cluster, {("orders", 0): (first, first + window)}, HEADER, SOURCE_ID, TopicRenamer(),
                         idle_s=10.0)
        at = RunStore(runs).locate(("orders", 0, "orders", 0), wanted)
        seconds.append(time.perf_counter() - began)
        found += at.offset == bisect_left(origins, wanted)
    cluster.close()
    return {"window": window, "asks": asks, "exact": found, "median_s": round(statistics.median(seconds), 4),
            "max_s": round(max(seconds), 4)}


def report(rows: list[dict[str, Any]], records: int) -> str:
    lines = ["# An exact lookup inside a span: reading the destination's provenance", "",
             f"{records:,} copies on one partition of a local broker, a commit marker's origin offset skipped after "
             "every 5-50; each lookup reads a window of copies with a consumer of its own and locates one origin "
             "offset in it. A span capped at S uncopied origin offsets needs a window of at most S + 1.", "",
             "| window (S + 1) | lookups | exact | median s | max s | spans for a week of 1,000 transactional "
             "partitions | their driver MiB |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        spans = MARKERS_PER_DAY * 7 // max(r["window"] - 1, 1)
        lines.append(f"| {r['window']:,} | {r['asks']} | {r['exact']} | {r['median_s']} | {r['max_s']} | "
                     f"{spans:,} | {spans * RUN_BYTES / 2**20:,.0f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--windows", default="100,1000,10000,100000")
    parser.add_argument("--asks", type=int, default=15)
    args = parser.parse_args()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    cluster = LocalCluster("span-lookup", PORT, cache_dir() / "bench" / f"span-lookup-{stamp}")
    rows = []
    cluster.start()
    try:
        origins = write_copies(cluster.bootstrap, args.records)
        print(f"{len(origins):,} copies written", flush=True)
        for window in (int(n) for n in args.windows.split(",")):
            rows.append(lookups(cluster.bootstrap, origins, window, args.asks))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        cluster.stop()
        shutil.rmtree(cluster.home, ignore_errors=True)
    print(write_aging("span-lookup", rows, report(rows, args.records)).relative_to(HERE.parent))


if __name__ == "__main__":
    main()
