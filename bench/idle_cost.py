"""`make bench-idle`: what each replicator costs while nothing moves.

    python -m bench.idle_cost [--repeat 3] [--window 60]

One source and one destination cluster of its own; a topic of 6 partitions with 6,000 records
and one consumer group committed on it. Each replicator copies it, settles (`SETTLE_S`), then
its process tree's CPU is read over `window` seconds in which no record and no commit arrive:
dr-stream as `make bench` runs it in micro-batch mode, the same flow with `offsets.translate:
false` (so the difference is what translation costs idle: the translate query's triggers, the
poller's rounds, the translation thread), and MirrorMaker 2 with its group offset sync, the
reference. Runs alternate, `repeat` times each; a figure is the median, with min-max.

Writes `<UTC time>.md` and `.json` (and `latest.*`) under bench/results/idle/; stops every
process it started by its PID.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

from bench.replicators import Replicator, dr_stream, mirror_maker
from bench.result_files import bench_clusters, stamp
from bench.run import HERE, _mm2_properties
from bench.workloads import Log, create_topics, load, wait_copied
from dr_stream.dev import workload
from dr_stream.runtime.paths import project_root

PORTS = (19792, 29792)
TOPIC, PARTITIONS, RECORDS = "bench.idle", 6, 6_000
SETTLE_S = 45.0
DR, DR_QUIET, MM2 = "dr-stream", "dr-stream, offsets.translate false", "MirrorMaker 2"
TOOLS = (DR, DR_QUIET, MM2)


def _flow_file(work: Path, translate: bool) -> Path:
    text = (HERE / "flow.yaml").read_text()
    if not translate:
        text = text.replace('offsets:\n  groups: {include: ["bench-.*"]}',
                            'offsets:\n  groups: {include: ["bench-.*"]}\n  translate: false')
        assert "translate: false" in text, "bench/flow.yaml's offsets section changed"
    path = work / "flow.yaml"
    path.write_text(text)
    return path


def _replicator(tool: str, work: Path, source: str, target: str, logs: Path) -> Replicator:
    work.mkdir(parents=True, exist_ok=True)
    log_file = logs / f"{tool.split(',')[0].replace(' ', '-')}-{work.name}.log"
    if tool == MM2:
        return mirror_maker(_mm2_properties(work, source, target, [TOPIC.replace(".", r"\.")]), log_file)
    env = {"BENCH_SOURCE": source, "BENCH_TARGET": target, "BENCH_WORK": str(work),
           "BENCH_TOPICS": TOPIC.replace(".", r"\."), "BENCH_TRIGGER": "200ms", "BENCH_MAX_TRIGGER": "30s",
           "BENCH_MODE": "microbatch", "DR_STREAM_MASTER": "local[2]", "DR_STREAM_DRIVER_MEMORY": "1g"}
    return dr_stream(_flow_file(work, tool == DR), env, log_file)


def idle_cpu_per_minute(replicator: Replicator, target: str, copied_topic: str, window_s: float, log: Log) -> float:
    """The replicator's CPU-seconds per minute over `window_s` once it copied the topic and settled."""
    replicator.start()
    try:
        wait_copied(target, copied_topic, RECORDS, PARTITIONS, replicator.started_at, 0.0, replicator.check_alive,
                    log, timeout_s=180)
        time.sleep(SETTLE_S)
        replicator.check_alive()
        replicator.cost.sample()
        before, began = replicator.cost.cpu_seconds, time.monotonic()
        time.sleep(window_s)
        replicator.cost.sample()
        return (replicator.cost.cpu_seconds - before) / (time.monotonic() - began) * 60
    finally:
        replicator.stop()


def report(results: dict[str, list[float]], window_s: float, when: str) -> str:
    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

    mm2 = statistics.median(results[MM2])
    lines = [f"# Idle cost: {when}", "",
             f"CPU-seconds per minute of each replicator's process tree over {window_s:g} s in which nothing "
             f"arrives, after copying {RECORDS:,} records on {PARTITIONS} partitions and {SETTLE_S:g} s of "
             "settling; median of the runs (min-max). One consumer group is committed on the topic.", "",
             "| replicator | CPU-s per minute idle | ratio to MirrorMaker 2 |", "|---|---:|---:|"]
    for tool in TOOLS:
        lines.append(f"| {tool} | {cell(results[tool])} | {statistics.median(results[tool]) / mm2:.2f} |")
    quiet = statistics.median(results[DR]) - statistics.median(results[DR_QUIET])
    lines += ["", f"Translation idle (the translate query's triggers, the poller, the translation thread): "
                  f"{quiet:.2f} CPU-s per minute."]
    return "\n".join(lines) + "\n"


def run(repeat: int, window_s: float, out: Path, log: Log = print) -> Path:
    when = stamp()
    results: dict[str, list[float]] = {tool: [] for tool in TOOLS}
    with bench_clusters("idle", when, PORTS) as (source, target, work, logs):
        create_topics(source.bootstrap, {TOPIC: PARTITIONS})
        load(source.bootstrap, TOPIC, RECORDS, 100, PARTITIONS, log)
        workload.commit_positions(source.bootstrap, {"bench-idle": {(TOPIC, p): RECORDS // PARTITIONS // 2
                                                                    for p in range(PARTITIONS)}})
        for r in range(repeat):
            # Later runs find the topic copied already (a new dr-stream flow's restart scan, MirrorMaker
            # 2's own offsets, tell them so): they settle sooner, and the window is idle either way.
            for tool in TOOLS[r % len(TOOLS):] + TOOLS[:r % len(TOOLS)]:
                copied = f"src.{TOPIC}" if tool == MM2 else TOPIC
                replicator = _replicator(tool, work / f"{r}-{TOOLS.index(tool)}", source.bootstrap, target.bootstrap,
                                         logs)
                per_minute = idle_cpu_per_minute(replicator, target.bootstrap, copied, window_s, log)
                results[tool].append(per_minute)
                log(f"-- run {r + 1} of {repeat}: {tool}: {per_minute:.2f} CPU-s per minute idle")
    out.mkdir(parents=True, exist_ok=True)
    markdown = out / f"{when}.md"
    markdown.write_text(report(results, window_s, when))
    (out / f"{when}.json").write_text(json.dumps(results, indent=1) + "\n")
    shutil.copyfile(markdown, out / "latest.md")
    return markdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.idle_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=project_root() / "bench" / "results" / "idle")
    args = parser.parse_args(argv)
    path = run(args.repeat, args.window, args.out, log=lambda line: print(line, flush=True))
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
