"""`python -m bench.ab`: dr-stream settings against each other, MirrorMaker 2 as the yardstick.

    python -m bench.ab --arm now= --arm "c2=DR_STREAM_DRIVER_JAVA_OPTIONS=-XX:GCTimeRatio=12" \
        [--mode dr-stream|dr-stream realtime] [--repeat 3] [--smoke] [--plain]

Each arm is a name and the environment it gives dr-stream (`NAME=KEY=VALUE;KEY=VALUE`, empty
for today's settings). The source is loaded once; each round runs every arm, then MirrorMaker 2,
in an order that shifts from round to round, each against a new destination, through `make
bench`'s workloads (bench/run.py); with `--plain`, the plain Spark copy too, so each arm's share
over Spark's own is read off the same rounds. Prints, per arm, the median (min-max) of catch-up
rate, CPU-seconds, peak RSS and steady p99, and each as a ratio to MirrorMaker 2's median of the
same run (and with `--plain`, a second table of ratios to the plain copy's): a change is kept only
when its ratios move beyond the spread of its runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench import workloads
from bench.report import DR, DR_RT, MM2, PLAIN, ToolResult
from bench.run import RUNNERS, fresh_target, start_source
from dr_stream.dev.clusters import LocalCluster
from dr_stream.runtime.paths import cache_dir

Log = Callable[[str], None]
PORTS = (19492, 29492)


@dataclass(frozen=True)
class Arm:
    name: str
    env: dict[str, str]

    @staticmethod
    def parse(text: str) -> Arm:
        """`name=KEY=VALUE;KEY=VALUE`; a value may hold `=` (JVM options do)."""
        name, _, settings = text.partition("=")
        if not name:
            raise ValueError(f"--arm {text!r}: give a name before the first '='")
        env = {}
        for item in filter(None, settings.split(";")):
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"--arm {text!r}: {item!r} is not KEY=VALUE")
            env[key.strip()] = value
        return Arm(name, env)


METRICS: dict[str, tuple[Callable[[ToolResult], float | None], str, str]] = {
    "catch-up records/s": (lambda r: r.catch_up.records_per_s if r.catch_up else None, ",.0f", "higher"),
    "CPU-seconds": (lambda r: r.cpu_seconds, ",.1f", "lower"),
    "catch-up CPU-s": (lambda r: r.catch_up_cpu_seconds, ",.1f", "lower"),
    "steady CPU-s": (lambda r: r.steady_cpu_seconds, ",.1f", "lower"),
    "peak RSS MiB": (lambda r: r.peak_rss / 2**20, ",.0f", "lower"),
    "steady p99 ms": (lambda r: workloads.percentile(r.latencies, 99) if r.latencies else None, ",.0f", "lower"),
}


def summary(results: dict[str, list[ToolResult]], reference: str = MM2) -> str:
    """A markdown table: per arm and metric, median (min-max) and the ratio of medians to the
    reference's."""
    lines = ["| arm | " + " | ".join(METRICS) + " |", "|---|" + "---:|" * len(METRICS)]
    ref = {m: _median(results.get(reference, []), f) for m, (f, _, _) in METRICS.items()}
    for arm, runs in results.items():
        cells = []
        for metric, (f, fmt, _) in METRICS.items():
            values = [v for v in (f(r) for r in runs) if v is not None]
            if not values:
                cells.append("-")
                continue
            median = statistics.median(values)
            cell = f"{median:{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"
            if arm != reference and (against := ref[metric]):
                cell += f" {median / against:.2f}x"
            cells.append(cell)
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    better = ", ".join(f"{m}: {d}" for m, (_, _, d) in METRICS.items())
    return "\n".join(lines) + f"\n\nRatios are to {reference}'s median; better is {better}."


def _median(runs: list[ToolResult], f: Callable[[ToolResult], float | None]) -> float | None:
    values = [v for v in (f(r) for r in runs) if v is not None]
    return statistics.median(values) if values else None


def run(arms: list[Arm], mode: str, repeat: int, size: workloads.Size, log: Log = print,
        plain: bool = False) -> dict[str, list[ToolResult]]:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    work = cache_dir() / "bench" / f"ab-{stamp}"
    logs = cache_dir() / "bench" / "logs"
    source = LocalCluster("bench-src", PORTS[0], work / "src")
    results: dict[str, list[ToolResult]] = {a.name: [] for a in arms}
    results[MM2] = []
    # a yardstick by the name of its runner: MirrorMaker 2, and the plain Spark copy when asked
    yardsticks = [MM2, *([PLAIN] if plain else [])]
    results.update({y: [] for y in yardsticks})
    entries: list[Arm | str] = [*arms, *yardsticks]
    try:
        megabytes = start_source(source, size, log)
        for r in range(repeat):
            shift = r % len(entries)
            for entry in entries[shift:] + entries[:shift]:
                name, tool = (entry, entry) if isinstance(entry, str) else (entry.name, mode)
                env = {} if isinstance(entry, str) else entry.env
                log(f"-- round {r + 1} of {repeat}: {name}")
                slug = name.replace(" ", "-")
                target = fresh_target(work, PORTS[1], f"dst-{r}-{slug}")
                kept = {k: os.environ.get(k) for k in env}
                os.environ.update(env)
                try:
                    results[name].append(RUNNERS[tool](tool, work / f"{slug}-{r}", logs / f"ab-{stamp}-{slug}-{r}.log",
                                                       source, target, size, megabytes, log))
                finally:
                    for key, value in kept.items():
                        if value is None:
                            os.environ.pop(key, None)
                        else:
                            os.environ[key] = value
                    target.stop()
                    shutil.rmtree(work / f"dst-{r}-{slug}", ignore_errors=True)
        return results
    finally:
        source.stop()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.splitlines()[0])
    parser.add_argument("--arm", action="append", required=True, help="NAME=KEY=VALUE;KEY=VALUE (empty: as is)")
    parser.add_argument("--mode", choices=[DR, DR_RT], default=DR)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script, measures nothing")
    parser.add_argument("--plain", action="store_true", help="the plain Spark copy in the same rounds")
    parser.add_argument("--records", type=int, help="catch-up records (default: make bench's); a long catch-up "
                                                    "amortizes each JVM's warm-up")
    args = parser.parse_args(argv)
    try:
        arms = [Arm.parse(a) for a in args.arm]
    except ValueError as exc:
        parser.error(str(exc))
    if len({a.name for a in arms} | {MM2, PLAIN}) != len(arms) + 2:
        parser.error("arm names must differ from each other and from MirrorMaker 2 and plain Spark")
    for arm in arms:
        print(f"arm {arm.name}: {arm.env or 'as is'}", flush=True)
    size = workloads.SMOKE if args.smoke else workloads.FULL
    if args.records:
        size = dataclasses.replace(size, records=args.records)
    results = run(arms, args.mode, args.repeat, size, log=lambda line: print(line, flush=True), plain=args.plain)
    print(summary(results))
    if args.plain:
        print("\n" + summary(results, reference=PLAIN))
    return 0


if __name__ == "__main__":
    sys.exit(main())
