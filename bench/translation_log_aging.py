"""The translation log as it ages: reads of an append-only log against a compacted one.

    python -m bench.translation_log_aging [--rows 5000000] [--groups 1000] [--partitions 10]

Writes the log the way a flow does (`TranslationLog.append` through delta-rs, commits of 2,000
to 50,000 rows, every position of a 1,000-group estate moving by turns), once as the flow wrote
it before compaction (append only) and once compacted as a running flow compacts it (every
`compact_every_rows` rows: a minute of an estate appending 2,000 rows a second). At each mark it
measures, in a fresh process each time (what `failover` with the source gone meets): `latest()`
and `last_source_ends()` seconds, that process's peak RSS, and the table's rows, files and bytes
on disk. Results: `bench/results/aging/translation-log-<UTC time>.md` and `.json`.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dr_stream.runtime.paths import cache_dir

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "aging"

_READ = """
import json, resource, sys, time
from dr_stream.positions.translation_log import TranslationLog
from dr_stream.runtime.delta_reads import DeltaReads
log = TranslationLog(sys.argv[1], DeltaReads(None))
began = time.monotonic(); latest = log.latest(); latest_s = time.monotonic() - began
began = time.monotonic(); ends = log.last_source_ends(); ends_s = time.monotonic() - began
rows = log.reads.query(log.path, "SELECT count(*) AS n FROM t")[0]["n"]
print(json.dumps({"latest_s": latest_s, "source_ends_s": ends_s, "positions": len(latest), "rows": rows,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _on_disk(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def _measure(path: Path, written: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", _READ, str(path)], capture_output=True, text=True, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    files, size = _on_disk(path)
    return {"written": written, **found, "files": files, "mib": size / 2**20}


def age(path: Path, rows: int, groups: int, partitions: int, marks: list[int], compact_every_rows: int | None,
        seed: int = 7) -> list[dict[str, Any]]:
    from dr_stream.positions.sync_outcome import COMMITTED
    from dr_stream.positions.translation_log import TranslationLog
    from dr_stream.positions.translation_rule import Translation
    from dr_stream.runtime.delta_reads import DeltaReads

    shutil.rmtree(path, ignore_errors=True)
    log = TranslationLog(str(path), DeltaReads(None))
    rng = random.Random(seed)
    keys = [(f"group-{g:04d}", p) for g in range(groups) for p in range(partitions)]
    offsets = dict.fromkeys(keys, 0)
    written, since_compaction, at, turn = 0, 0, 1_700_000_000_000, 0
    results, pending = [], sorted(marks)
    while written < rows:
        size = min(rng.randint(2_000, 50_000), rows - written)
        batch = []
        for _ in range(size):
            key = keys[turn % len(keys)]
            turn += 1
            offsets[key] += rng.randint(1, 50)
            at += 1
            o = offsets[key]
            batch.append((Translation(group=key[0], topic="orders", partition=key[1], source_offset=o,
                                      source_timestamp=at, dest_topic="orders", dest_partition=key[1], offset=o,
                                      method="exact", note="", clamped=False, log_start=0, log_end=o + 100,
                                      last_copied=o + 90, source_log_end=o + 100, translated_at=at), COMMITTED))
        log.append(batch)
        written += size
        since_compaction += size
        if compact_every_rows and since_compaction >= compact_every_rows:
            log.compact()
            since_compaction = 0
        while pending and written >= pending[0]:
            results.append(_measure(path, written))
            print(f"  {'compacted' if compact_every_rows else 'append only'}: {results[-1]}", flush=True)
            pending.pop(0)
    return results


def markdown(runs: dict[str, list[dict[str, Any]]], groups: int, partitions: int) -> str:
    lines = [f"# Translation log aging ({groups:,} groups x {partitions} partitions = "
             f"{groups * partitions:,} positions)", "",
             "Rows written the way a flow appends them (delta-rs, commits of 2,000-50,000 rows); each figure "
             "read by a fresh process, as `failover` with the source gone reads the log.", "",
             "| log | rows written | rows kept | `latest()` s | `last_source_ends()` s | reader peak RSS MiB | "
             "files | MiB on disk |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, results in runs.items():
        lines += [f"| {name} | {r['written']:,} | {r['rows']:,} | {r['latest_s']:.2f} | {r['source_ends_s']:.2f} | "
                  f"{r['rss_mib']:.0f} | {r['files']:,} | {r['mib']:.1f} |" for r in results]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.translation_log_aging", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--compact-every-rows", type=int, default=120_000,
                        help="rows between compactions (a minute at 2,000 rows a second)")
    args = parser.parse_args(argv)
    marks = [m for m in (100_000, 1_000_000, args.rows) if m <= args.rows]
    work = cache_dir() / "bench" / "translation-log-aging"
    runs = {}
    for name, every in (("append only", None), ("compacted", args.compact_every_rows)):
        print(f"{name}: writing {args.rows:,} rows", flush=True)
        began = time.monotonic()
        runs[name] = age(work / name.replace(" ", "-"), args.rows, args.groups, args.partitions, marks, every)
        print(f"{name}: {time.monotonic() - began:.0f} s", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (OUT / f"translation-log-{stamp}.json").write_text(json.dumps(runs, indent=2) + "\n")
    text = markdown(runs, args.groups, args.partitions)
    (OUT / f"translation-log-{stamp}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
