"""`make bench-scale`: dr-stream and MirrorMaker 2 at production scale, in one run.

    python -m bench.scale [--smoke] [--sizes 1000:5000,300:1500,10:50] [--repeat 2] [--out DIR]

For each size (partitions in topics of 10, groups) and repeat, each replicator in alternating
order gets two new clusters of its own and goes through:

1. 5 records on every partition and every group committed at the log end, before it starts;
   start -> first record, -> every record, -> every group shown on the destination;
2. 5 more records a partition, copied; then every group commits at the new end at once, and the
   destination's positions are read every round for the watch: each group's time from its
   commit's acknowledgement to the first round that shows its new position (bench/scale_workload.py
   says what counts as new), dr-stream's poller and translate rounds from its /metrics, the
   process tree's cores busy over the watch;
3. kill -9 of the process tree, one more record a partition, a restart: -> first copy, -> every
   record, and the records beyond the source's count (copied twice).

Peak RSS covers both lives, CPU-seconds the first. Results (`<UTC time>.md`, `.json`, `.png`,
`latest.*`) go under `--out`; every process started is stopped by its PID.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from urllib.request import urlopen

from bench import scale_workload as workload
from bench.replicators import Replicator, mirror_maker
from bench.result_files import bench_clusters, stamp, write_results
from bench.run import _machine, _mm2_properties
from bench.scale_report import DR, MM2, Run, markdown, plot
from bench.scale_workload import Scale
from dr_stream.dev.clusters import LocalCluster
from dr_stream.runtime.paths import project_root

HERE = Path(__file__).resolve().parent
PORTS = (19992, 29992)
METRICS_PORT = 19999
FULL = [Scale(1000, 5000), Scale(300, 1500), Scale(10, 50)]
SMOKE = [Scale(20, 40)]
Log = Callable[[str], None]
SETTINGS = ("Each replicator alone on two new single-broker clusters; records of 128 bytes. dr-stream: "
            "bench/flow.yaml, micro-batch, trigger 1 s widening to 30 s, `local[2]`, driver 2g, metrics on "
            "/metrics. MirrorMaker 2: bench/mm2.properties (dedicated mode, tasks.max=2, heap 2G, group offset "
            "sync and checkpoints every 1 s, groups refreshed every 5 s, offset flush every 1 s), its groups "
            "`bench-g.*`. Group positions are read from the destination in one batch of requests per round; "
            "MirrorMaker 2's translated positions count as live when they change (they are approximate), "
            "dr-stream's are also checked exact.")


class Limits:
    def __init__(self, smoke: bool) -> None:
        self.copy_s, self.groups_s, self.watch_s, self.window_s = (120, 90, 60, 15) if smoke else (600, 300, 180, 60)


def _dr_stream(work: Path, source: LocalCluster, target: LocalCluster, log_file: Path) -> Replicator:
    env = {"BENCH_SOURCE": source.bootstrap, "BENCH_TARGET": target.bootstrap, "BENCH_WORK": str(work),
           "BENCH_TOPICS": r"sc\..*", "BENCH_TRIGGER": "1s", "BENCH_MAX_TRIGGER": "30s", "BENCH_MODE": "microbatch",
           "DR_STREAM_MASTER": "local[2]", "DR_STREAM_DRIVER_MEMORY": "2g"}
    python = project_root() / ".venv" / "bin" / "python"
    return Replicator(DR, [str(python), "-m", "dr_stream.cli", "run", "--config", str(HERE / "flow.yaml"),
                           "--metrics-port", str(METRICS_PORT)], env, log_file)


def _mirror_maker(work: Path, source: LocalCluster, target: LocalCluster, log_file: Path) -> Replicator:
    work.mkdir(parents=True, exist_ok=True)
    properties = _mm2_properties(work, source.bootstrap, target.bootstrap, [r"sc\..*"])
    with open(properties, "a") as f:  # a later line wins in Java properties
        f.write("\nsrc->dst.groups = bench-g.*\n")
    return mirror_maker(properties, log_file)


STARTERS = {DR: _dr_stream, MM2: _mirror_maker}
RENAMES: dict[str, Callable[[str], str]] = {DR: str, MM2: lambda t: f"src.{t}"}


def _rounds(run: Run) -> Callable[[], None]:
    """One scrape of dr-stream's /metrics into the run's round figures."""
    from prometheus_client.parser import text_string_to_metric_families

    def scrape() -> None:
        try:
            text = urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5).read().decode()
        except OSError:
            return
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == "dr_stream_loop_round_seconds" and s.labels.get("loop") in ("poller", "translate"):
                    run.rounds.setdefault(s.labels["loop"], []).append(s.value)
    return scrape


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f} s"


def _wait(what: str, done: Callable[[], bool], replicator: Replicator, since: float, timeout_s: float,
          log: Log) -> float | None:
    """Seconds from `since` until `done`, or None after `timeout_s` (said)."""
    while time.monotonic() - since < timeout_s:
        replicator.check_alive()
        if done():
            return time.monotonic() - since
        time.sleep(0.25)
    log(f"  {what}: not within {timeout_s:.0f} s")
    return None


def _watch(run: Run, target: LocalCluster, scale: Scale, replicator: Replicator, limits: Limits, log: Log,
           source: LocalCluster) -> None:
    rename = RENAMES[run.tool]
    wanted = scale.at(10, rename)
    before = workload.positions(target.bootstrap, wanted)
    scrape = _rounds(run) if run.tool == DR else (lambda: None)
    replicator.cost.sample()
    began, cpu = time.monotonic(), replicator.cost.cpu_seconds
    acknowledged = workload.commit(source.bootstrap, scale.at(10))
    live: dict[str, float] = {}
    while time.monotonic() - began < limits.watch_s and (len(live) < len(wanted)
                                                         or time.monotonic() - began < limits.window_s):
        replicator.check_alive()
        now = workload.positions(target.bootstrap, wanted)
        seen = time.monotonic()
        for group in workload.moved(before, now, wanted) - live.keys():
            live[group] = seen - acknowledged[group]
        scrape()
        time.sleep(0.5)
    replicator.cost.sample()
    run.cores_busy = (replicator.cost.cpu_seconds - cpu) / (time.monotonic() - began)
    run.live_s, run.not_live, run.watch_s = sorted(live.values()), len(wanted) - len(live), limits.watch_s
    run.exact = workload.exact(workload.positions(target.bootstrap, wanted), wanted)
    log(f"  groups: {len(live):,} of {len(wanted):,} live, p50 {run.live(50):.2f} s, slowest {run.live(100):.2f} s; "
        f"{run.exact:,} exact; {run.cores_busy:.2f} cores busy")


def measure(tool: str, scale: Scale, repeat: int, when: str, limits: Limits, log: Log) -> Run:
    run = Run(tool, scale.partitions, scale.groups, repeat)
    rename = RENAMES[tool]
    with bench_clusters(f"scale-{scale.partitions}-{tool.split()[0].lower()}-{repeat}", when, PORTS) as (
            source, target, work, logs):
        workload.create_topics(source.bootstrap, scale)
        workload.load(source.bootstrap, scale, 5, 0)
        workload.commit(source.bootstrap, scale.at(5))
        log(f"== {tool}, {scale.label()}, repeat {repeat}: starting")
        replicator = STARTERS[tool](work / "state", source, target, logs / "first.log")
        replicator.start()
        try:
            start = replicator.started_at
            total = scale.partitions * 5
            run.start_to_first_copy_s = _wait("first copy", lambda: workload.log_ends_total(
                target.bootstrap, scale, rename) > 0, replicator, start, limits.copy_s, log)
            run.start_to_all_copied_s = _wait("all copied", lambda: workload.log_ends_total(
                target.bootstrap, scale, rename) >= total, replicator, start, limits.copy_s, log)
            first = scale.at(5, rename)
            run.first_groups_s = _wait("every group on the destination", lambda: workload.shown(
                workload.positions(target.bootstrap, first), first), replicator, start, limits.groups_s, log)
            log(f"  start -> first copy {_s(run.start_to_first_copy_s)}, all {_s(run.start_to_all_copied_s)}, "
                f"every group {_s(run.first_groups_s)}")
            workload.load(source.bootstrap, scale, 5, 1)
            _wait("second load copied", lambda: workload.log_ends_total(target.bootstrap, scale, rename) >= 2 * total,
                  replicator, time.monotonic(), limits.copy_s, log)
            time.sleep(3)  # MirrorMaker 2 emits the offset sync of a partition's last record at its next flush
            _watch(run, target, scale, replicator, limits, log, source)
            run.cpu_seconds = replicator.cost.cpu_seconds
        finally:
            replicator.kill9()
        workload.load(source.bootstrap, scale, 1, 2)
        restarted = STARTERS[tool](work / "state", source, target, logs / "restart.log")
        restarted.start()
        try:
            since = restarted.started_at
            run.restart_to_first_copy_s = _wait("first copy after the restart", lambda: workload.log_ends_total(
                target.bootstrap, scale, rename) > 2 * total, restarted, since, limits.copy_s, log)
            run.restart_to_all_copied_s = _wait("all copied after the restart", lambda: workload.log_ends_total(
                target.bootstrap, scale, rename) >= 2 * total + scale.partitions, restarted, since, limits.copy_s, log)
            time.sleep(5)  # a replayed batch writing twice would do so by now
            run.extra_copies = workload.log_ends_total(target.bootstrap, scale, rename) - 2 * total - scale.partitions
        finally:
            restarted.stop()
        run.peak_rss_mib = max(replicator.cost.peak_rss, restarted.cost.peak_rss) / 2**20
        log(f"  kill -9 -> first copy {_s(run.restart_to_first_copy_s)}, all {_s(run.restart_to_all_copied_s)}, "
            f"{run.extra_copies} copied twice; CPU {run.cpu_seconds:.0f} s, peak RSS {run.peak_rss_mib:.0f} MiB")
    return run


def run_all(scales: list[Scale], repeat: int, out: Path, limits: Limits, log: Log, tools: tuple[str, ...] = (DR, MM2)
            ) -> Path:
    when, runs = stamp(), []
    for scale in scales:
        for r in range(repeat):
            for tool in (tools if r % 2 == 0 else tools[::-1]):
                runs.append(measure(tool, scale, r, when, limits, log))
                # written after every run: a long bench stopped early keeps what it measured
                report = write_results(out, when, lambda png: markdown(runs, when, _machine(), SETTINGS, png),
                                       [asdict(r) for r in runs], lambda png: plot(runs, png))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.scale", description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one small size, short waits, one repeat")
    parser.add_argument("--sizes", help="partitions:groups,... (default 1000:5000,300:1500,10:50)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", choices=("dr-stream", "mm2"), help="one replicator (to look into it)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "scale")
    args = parser.parse_args(argv)
    scales = SMOKE if args.smoke else FULL
    if args.sizes:
        scales = [Scale(*(int(n) for n in s.split(":"))) for s in args.sizes.split(",")]
    began = time.monotonic()

    def log(line: str) -> None:
        print(f"[{time.monotonic() - began:6.0f}s] {line}", flush=True)

    tools = {"dr-stream": (DR,), "mm2": (MM2,)}.get(args.only, (DR, MM2))
    report = run_all(scales, 1 if args.smoke else args.repeat, args.out, Limits(args.smoke), log, tools)
    log(f"results: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
