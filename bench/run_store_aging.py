"""What the driver's run store holds when copies never continue each other, as it ages.

    python -m bench.run_store_aging [--partitions 1000] [--runs 100000,1000000]

A transactional source writes a commit marker after each transaction: the marker takes a source
offset and is not copied, so each transaction's copies form a run of their own (the next one is
one offset further from its destination offsets), and no two runs merge. The same holds for
identical topic names both ways (local records between the copies) and compacted sources (holes
in the source's offsets). This builds a `RunStore` the way a flow's feed fills it, one run per
transaction of 5-50 records spread over `partitions` partitions, and measures at each total:
the driver memory the runs take (tracemalloc), the time to add them, and a lookup (`locate`) of
10,000 random offsets. Results: `bench/results/aging/run-store-<UTC time>.md` and `.json`.

At an estate's pace (one transaction per partition per second, 1,000 partitions) the store
gains 86 million runs a day, held until the destination's retention passes them: the figures
say what that costs and where a representation of gaps must take over.
"""

from __future__ import annotations

import argparse
import json
import random
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.result_files import write_aging

if TYPE_CHECKING:
    from dr_stream.index.run_store import Run, RunStore

HERE = Path(__file__).resolve().parent
RUNS_PER_DAY = 86_400 * 1_000  # one transaction a second on each of 1,000 partitions


def transactions(partitions: int, runs: int, seed: int = 7) -> Iterator[Run]:
    """Runs as a transactional source's copies are reported: per partition, each transaction's
    records contiguous on the destination, one source offset (its marker) between two."""
    from dr_stream.index.run_store import Run

    rng = random.Random(seed)
    origin = dict.fromkeys(range(partitions), 0)
    dest = dict.fromkeys(range(partitions), 0)
    for i in range(runs):
        p = i % partitions
        n = rng.randint(5, 50)
        yield Run("c1", "orders", p, "orders", p, origin[p], origin[p] + n - 1, dest[p], dest[p] + n - 1,
                  i, i, i)
        origin[p] += n + 1  # the commit marker
        dest[p] += n


def measure(partitions: int, runs: int, lookups: int = 10_000) -> dict[str, Any]:
    from dr_stream.index.run_store import RunStore

    tracemalloc.start()
    began = time.perf_counter()
    store = RunStore()
    for run in transactions(partitions, runs):
        store.add(run)
    added_s = time.perf_counter() - began
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rng = random.Random(3)
    ends = {p: store.last(("orders", p, "orders", p)).origin_end for p in range(partitions)}  # type: ignore[union-attr]
    asks = [(p, rng.randint(0, ends[p])) for p in (rng.randrange(partitions) for _ in range(lookups))]
    began = time.perf_counter()
    for p, offset in asks:
        store.locate(("orders", p, "orders", p), offset)
    locate_s = time.perf_counter() - began
    runs_held = len(store)
    disordered_s = out_of_order_lookups(store, partitions, ends, asks)
    spanned = in_spans(store, ends)
    return {"runs": runs, "runs_held": runs_held, "driver_mib": round(held / 2**20, 1),
            "bytes_per_run": round(held / max(runs_held, 1)), "add_s": round(added_s, 2),
            "locate_us": round(locate_s / lookups * 1e6, 1),
            "locate_disordered_us": round(disordered_s / lookups * 1e6, 1),
            "estate_hours": round(runs / RUNS_PER_DAY * 24, 2), **spanned}


def out_of_order_lookups(store: RunStore, partitions: int, ends: dict[int, int], asks: list[tuple[int, int]]) -> float:
    """The same lookups once every partition's key holds a run out of origin order (a restart
    copied a transaction's records, left out by a failed write, after records past them), in a
    store of their own: seconds for them all."""
    from dataclasses import replace

    from dr_stream.index.run_store import RunStore

    late = RunStore(replace(r) for r in store)
    for p in range(partitions):
        last = late.last(("orders", p, "orders", p))
        assert last is not None
        late.add(replace(last, origin_start=1, origin_end=3, dest_start=last.dest_end + 1, dest_end=last.dest_end + 3))
    began = time.perf_counter()
    for p, offset in asks:
        late.locate(("orders", p, "orders", p), offset)
    return time.perf_counter() - began


def in_spans(store: RunStore, ends: dict[int, int]) -> dict[str, Any]:
    """The store after the flow's upkeep with every group at its partition's newest run (the
    floor): its runs below joined into spans (`index.spans`), and what it holds then."""
    from dataclasses import replace

    from dr_stream.index.run_store import RunStore
    from dr_stream.index.spans import span_store

    began = time.perf_counter()
    span_store(store, "c1", {("orders", p): end for p, end in ends.items()})
    span_s = time.perf_counter() - began
    kept = list(store)
    tracemalloc.start()
    rebuilt = RunStore(replace(r) for r in kept)  # the same runs in a store of their own, measured
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"spanned_held": len(rebuilt), "spanned_mib": round(held / 2**20, 2), "span_s": round(span_s, 2)}


def report(rows: list[dict[str, Any]], partitions: int) -> str:
    lines = [f"# The run store when copies never continue each other ({partitions:,} partitions)", "",
             "One run per transaction (a commit marker between two), as a flow's feed adds them; `add s` is "
             "timed under tracemalloc, which slows allocation several times.", "",
             "| runs added | runs held | estate hours | driver MiB | bytes per run | add s | locate µs | "
             "locate µs, a run out of order per key | held after the upkeep's spans | their MiB | span s |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['runs']:,} | {r['runs_held']:,} | {r['estate_hours']} | {r['driver_mib']:,} | "
              f"{r['bytes_per_run']} | {r['add_s']} | {r['locate_us']} | {r.get('locate_disordered_us', '')} | "
              f"{r['spanned_held']:,} | "
              f"{r['spanned_mib']} | {r['span_s']} |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--runs", default="100000,1000000")
    args = parser.parse_args()
    rows = []
    for runs in (int(n) for n in args.runs.split(",")):
        rows.append(measure(args.partitions, runs))
        print(json.dumps(rows[-1]), flush=True)
    print(write_aging("run-store", rows, report(rows, args.partitions)).relative_to(HERE.parent))


if __name__ == "__main__":
    main()
