"""`make profile`: where each replicator's CPU goes in `make bench`'s catch-up and steady phases.

    python -m bench.profile [--label before] [--smoke] [--only TOOL] [--out bench/results]

Runs `make bench`'s workloads once per replicator (dr-stream micro-batch, dr-stream real-time, the
plain Spark copy, MirrorMaker 2) on clusters of its own, each with Java Flight Recorder on its JVM
and py-spy on the Python driver (bench/cpu_profile.py), and writes `profile-<date>-<label>.md` and
`.json` under `--out`: per phase, CPU-seconds by component (bench/cpu_components.py) side by side.
A flame graph (SVG) of every JVM and driver goes to `.cache/bench/profiles/profile-<date>-<label>/`
(megabytes each: kept out of the repository); the recordings and py-spy's raw files stay under
.cache/bench/logs/. The recorder and the sampler cost a few percent of CPU themselves: compare
profiles with profiles, and `make bench` with `make bench`.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path

from bench import run as bench_run
from bench import workloads
from bench.cpu_profile import CpuSeconds, Profiler, Sampled, attribute
from bench.flame_graph import flame_graph_svg
from bench.report import MM2, TOOLS
from bench.workloads import Size
from dr_stream.dev.clusters import LocalCluster
from dr_stream.runtime.paths import cache_dir, project_root

PORTS = (19692, 29692)
REPORTED = ("catch-up", "steady")
Log = bench_run.Log


def _slug(tool: str) -> str:
    return tool.replace(" ", "-").replace("(", "").replace(")", "")


def _thread_root(name: str) -> str:
    # Spark names a task's thread after the task: one root per kind of thread, not per task.
    return re.sub(r"\d+", "N", re.sub(r" for task .*", "", name))


def flame_stacks(sampled: Sampled) -> list[tuple[list[str], int]]:
    return [([_thread_root(thread), *stack], n) for samples in sampled.values() for (thread, stack), n in
            samples.items()]


def _records(size: Size, phase: str) -> int:
    return size.records if phase == "catch-up" else size.steady_rate * size.steady_seconds


MIN_SHARE = 0.01
OTHER = "other components, each under 1% in every replicator"


def _table(by_tool: dict[str, CpuSeconds], seconds: dict[str, float], size: Size, phase: str) -> list[str]:
    tools = list(by_tool)
    per = "1,000 records" if phase == "catch-up" else "1,000 records sent"
    lines = [f"| component | {' | '.join(f'{t}: CPU-s (share)' for t in tools)} |",
             "|---|" + "---:|" * len(tools)]
    def share(component: str) -> float:
        return max(cpu.get(component, 0.0) / (sum(cpu.values()) or 1.0) for cpu in by_tool.values())

    components = sorted({c for cpu in by_tool.values() for c in cpu}, key=lambda c: -share(c))
    small = [c for c in components if share(c) < MIN_SHARE]
    by_tool = {t: {**{c: s for c, s in cpu.items() if c not in small},
                   OTHER: sum(s for c, s in cpu.items() if c in small)} for t, cpu in by_tool.items()}
    for component in [c for c in components if c not in small] + [OTHER]:
        cells = []
        for tool in tools:
            cpu, total = by_tool[tool].get(component, 0.0), sum(by_tool[tool].values()) or 1.0
            cells.append(f"{cpu:,.1f} ({100 * cpu / total:.0f}%)" if cpu >= 0.05 else "-")
        lines.append(f"| {component} | {' | '.join(cells)} |")
    totals = [f"**{sum(by_tool[t].values()):,.1f}**" for t in tools]
    lines.append(f"| **total** | {' | '.join(totals)} |")
    lines.append(f"| wall seconds of the phase | {' | '.join(f'{seconds[t]:,.1f}' for t in tools)} |")
    lines.append(f"| CPU-ms per {per} | "
                 + " | ".join(f"{1000 * sum(by_tool[t].values()) / _records(size, phase) * 1000:,.2f}"
                              for t in tools) + " |")
    return lines


def run(size: Size, out: Path, label: str, tools: list[str], log: Log) -> Path:
    when = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    name = f"profile-{time.strftime('%Y-%m-%d', time.gmtime())}-{label}"
    work = cache_dir() / "bench" / f"profile-{when}"
    logs = cache_dir() / "bench" / "logs" / f"profile-{when}"
    # Flame graphs are megabytes each: they stay beside the recordings, out of the repository.
    figures = cache_dir() / "bench" / "profiles" / name
    figures.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    source = LocalCluster("bench-src", PORTS[0], work / "src")
    cpu: dict[str, dict[str, CpuSeconds]] = {phase: {} for phase in REPORTED}
    seconds: dict[str, dict[str, float]] = {phase: {} for phase in REPORTED}
    whole: dict[str, float] = {}
    try:
        megabytes = bench_run.start_source(source, size, log)
        for tool in tools:
            slug = _slug(tool)
            target = bench_run.fresh_target(work, PORTS[1], f"dst-{slug}")
            profiler = Profiler(tool, logs / slug)
            try:
                bench_run.RUNNERS[tool](tool, work / slug, logs / f"{slug}.log", source, target, size, megabytes,
                                        log, profiler=profiler)
            finally:
                target.stop()
            samples = profiler.samples()
            whole[tool] = sum(sum(attribute(p.before, p.after, {}).values()) for p in profiler.phases if p.after)
            for phase in profiler.phases:
                if phase.name not in REPORTED or phase.after is None:
                    continue
                jvm, python = samples[phase.name]
                cpu[phase.name][tool] = attribute(phase.before, phase.after, {**jvm, **python})
                seconds[phase.name][tool] = phase.seconds
                for kind, sampled in (("jvm", jvm), ("driver", python)):
                    if sampled:
                        svg = flame_graph_svg(flame_stacks(sampled), f"{tool}, {phase.name}: {kind}")
                        (figures / f"{slug}-{phase.name}-{kind}.svg").write_text(svg)
                top = sorted(cpu[phase.name][tool].items(), key=lambda item: -item[1])[:3]
                log(f"  {tool}, {phase.name}: {sum(cpu[phase.name][tool].values()):,.1f} CPU-s in "
                    f"{phase.seconds:,.1f} s; most: " + ", ".join(f"{c} {s:,.1f}" for c, s in top))
    finally:
        source.stop()
        shutil.rmtree(work, ignore_errors=True)
    report = out / f"{name}.md"
    report.write_text(markdown(cpu, seconds, whole, size, name, when))
    # The figures behind the tables, for comparing two profiles without reading markdown.
    (out / f"{name}.json").write_text(json.dumps({"when": when, "whole_run_cpu_s": whole, "seconds": seconds,
                                                  "cpu_s": cpu}, indent=1, sort_keys=True))
    log(f"profile: {report}")
    return report


def markdown(cpu: dict[str, dict[str, CpuSeconds]], seconds: dict[str, dict[str, float]],
             whole: dict[str, float], size: Size, name: str, when: str) -> str:
    lines = [f"# Where the CPU goes: {name}", "",
             f"Recorded {when} by `make profile` (bench/profile.py): `make bench`'s workloads "
             f"({size.records:,} records of {size.record_bytes} B on {size.partitions} partitions to catch up; "
             f"{size.steady_rate:,} records/s for {size.steady_seconds} s steady, with the failover groups' commits), "
             "one run per replicator, each alone on 2 cores. CPU-seconds are exact per OS thread (/proc); a "
             "thread's time is split over components by its samples (Java Flight Recorder, 10 ms; py-spy, "
             f"{100} Hz, non-blocking). Components: bench/cpu_components.py. The recorder and the sampler "
             "add a few percent.", "",
             "CPU-seconds of the whole run (start to stop): "
             + ", ".join(f"{tool} {s:,.0f}" for tool, s in whole.items()) + ".", ""]
    for phase in REPORTED:
        if not cpu[phase]:
            continue
        lines += [f"## {phase}", ""]
        lines += _table(cpu[phase], seconds[phase], size, phase)
        lines += ["", f"Flame graphs (kept out of the repository, in `.cache/bench/profiles/{name}/` of the "
                  "checkout that recorded them): " + ", ".join(
                      f"`{_slug(tool)}-{phase}-{kind}.svg`" for tool in cpu[phase]
                      for kind in ("jvm", "driver") if (kind == "jvm" or not tool.startswith(MM2))), ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="now", help="names the report: profile-<date>-<label>.md")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the harness, measures nothing")
    parser.add_argument("--only", choices=[*TOOLS, bench_run.MM2_COMPAT], action="append",
                        help="profile only this replicator (MirrorMaker 2 3.x only when named)")
    parser.add_argument("--out", type=Path, default=project_root() / "bench" / "results")
    args = parser.parse_args(argv)
    size = workloads.SMOKE if args.smoke else workloads.FULL
    run(size, args.out, args.label, args.only or list(TOOLS), lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
