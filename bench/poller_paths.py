"""`make bench-poller`: the group poller's two ways of reading positions, at 5,000 groups.

    python -m bench.poller_paths [--groups 5000] [--repeat 2] [--out bench/results/poller]

Starts its own single-broker cluster (`__consumer_offsets` with 50 partitions, Kafka's
default), a topic of 10 partitions, and GROUPS groups that each commit all ten. Then, in
alternation and REPEAT times, the flow's `CommittedOffsetPoller` runs on each path
(`__consumer_offsets` and `admin`) through the same scenarios:

* first round: every group's positions read, stamped and written to `__consumer_timestamps`;
* idle rounds: nothing committed since the last round (the flow's steady state);
* 10% move, all move: that share of groups commits new offsets; the seconds from the last
  commit's acknowledgement to every moved position reported, and the rounds that took.

Each figure is wall time and CPU-seconds (the bench process, where the poller and librdkafka
run, plus the bench JVM, where the admin path's Java client runs). Writes `<UTC time>.md`,
`.json` and `.png` under `--out`, copies them to `latest.*`, and stops what it started by PID.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

from confluent_kafka.admin import NewTopic

from bench.bench_jvm import BenchJvm
from bench.workloads import bench_cluster
from dr_stream.core.policy import GroupFilter, TopicFilter
from dr_stream.dev.clusters import LocalCluster
from dr_stream.kafka import clients
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.kafka.group_offsets.java_admin import GroupOffsets
from dr_stream.positions.committed_positions import AdminPositions, CommittedPositions, TopicPositions
from dr_stream.positions.consumer_timestamps import ensure_topic
from dr_stream.positions.poller import CommittedOffsetPoller
from dr_stream.runtime.paths import cache_dir, project_root

PORT = 29192
TOPIC = "poller.t"
PARTITIONS = 10
RECORDS = 1000  # per partition: groups commit anywhere in it
IDLE_ROUNDS = 10
PATHS = ("__consumer_offsets", "admin")
Log = Callable[[str], None]


@dataclass
class Figure:
    wall_s: float
    cpu_s: float
    rounds: int = 1


@dataclass
class PathRun:
    path: str
    first: Figure | None = None
    idle: list[Figure] = field(default_factory=list)
    moved: dict[str, Figure] = field(default_factory=dict)  # "10%", "100%": commit -> all reported


class Cpu:
    """CPU-seconds of this process and the bench JVM together."""

    def __init__(self, jvm: BenchJvm) -> None:
        self.jvm = jvm

    def now(self) -> float:
        return time.process_time() + self.jvm.cpu_seconds()


def _load(bootstrap: str) -> None:
    admin = clients.admin(bench_cluster(bootstrap))
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(timeout=60)
    ensure_topic(admin)  # __consumer_timestamps, as the flow creates it
    producer = clients.producer(bench_cluster(bootstrap), {"linger.ms": 20})
    for p in range(PARTITIONS):
        for _ in range(RECORDS):
            producer.produce(TOPIC, value=b"x" * 100, partition=p)
        producer.poll(0)
    producer.flush(60)


def _commit(offsets: GroupOffsets, groups: list[str], at: Callable[[int, int], int]) -> dict[tuple[str, str, int], int]:
    wanted = {g: {(TOPIC, p): at(i, p) for p in range(PARTITIONS)} for i, g in enumerate(groups)}
    failed = offsets.commit(wanted, "")
    if failed:
        raise RuntimeError(f"{len(failed)} groups failed to commit, e.g. {next(iter(failed.items()))}")
    return {(g, t, p): o for g, w in wanted.items() for (t, p), o in w.items()}


def _offset_of(generation: int, group: int, partition: int) -> int:
    """Where group `group` commits `partition` in round `generation`: a new offset each round."""
    return (group * 7 + partition + generation * 37) % RECORDS + 1


def _moved_wall_s(share: str, run: PathRun) -> list[float]:
    return [run.moved[share].wall_s]


def _moved_cpu_s(share: str, run: PathRun) -> list[float]:
    return [run.moved[share].cpu_s]


def _round(poller: CommittedOffsetPoller, cpu: Cpu) -> Figure:
    wall, used = time.monotonic(), cpu.now()
    poller.poll_once()
    return Figure(time.monotonic() - wall, cpu.now() - used)


def _until_reported(poller: CommittedOffsetPoller, cpu: Cpu, wanted: dict[tuple[str, str, int], int],
                    timeout_s: float = 120.0) -> Figure:
    """Rounds at the poller's own pace from now until every wanted position is reported."""
    wall, used, rounds = time.monotonic(), cpu.now(), 0
    while any(poller.reported.get(k) != o for k, o in wanted.items()):
        if time.monotonic() - wall > timeout_s:
            raise RuntimeError(f"{poller.positions_from}: positions not all reported within {timeout_s:g} s")
        poller.poll_once()
        rounds += 1
        time.sleep(poller.pace.wait_s())
    return Figure(time.monotonic() - wall, cpu.now() - used, rounds)


def _run_path(path: str, cluster: LocalCluster, jvm: BenchJvm, groups: list[str], generation: int,
              log: Log) -> PathRun:
    cpu, run = Cpu(jvm), PathRun(path)
    context = ClusterContext(cluster.config)
    poller = CommittedOffsetPoller(context, GroupFilter(), TopicFilter((r"poller\.t",)), positions_from=path,
                                   log=lambda line: log(f"  poller: {line}"))
    positions: CommittedPositions = (AdminPositions(context, GroupFilter(), jvm.group_offsets(cluster.config))
                                     if path == "admin" else TopicPositions(cluster.config, GroupFilter()))
    poller.open(positions)
    committer = jvm.group_offsets(cluster.config)
    try:
        run.first = _round(poller, cpu)
        log(f"  {path}: first round {run.first.wall_s:.2f} s ({len(poller.reported)} positions)")
        run.idle = [_round(poller, cpu) for _ in range(IDLE_ROUNDS)]
        log(f"  {path}: idle round median {statistics.median(f.wall_s for f in run.idle):.3f} s")
        for share, moving in (("10%", groups[: len(groups) // 10]), ("100%", groups)):
            generation += 1
            wanted = _commit(committer, moving, partial(_offset_of, generation))
            run.moved[share] = _until_reported(poller, cpu, wanted)
            log(f"  {path}: {share} of groups moved -> all reported in {run.moved[share].wall_s:.2f} s "
                f"({run.moved[share].rounds} rounds)")
    finally:
        committer.close()
        poller.close()
        context.close()
    return run


def markdown(runs: list[PathRun], groups: int, repeat: int, machine: str) -> str:
    def cell(values: list[float], fmt: str = ".3f") -> str:
        if not values:
            return "-"
        return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}-{max(values):{fmt}}]"

    rows: list[tuple[str, Callable[[PathRun], list[float]]]] = [
        ("first round, s", lambda r: [r.first.wall_s] if r.first else []),
        ("first round, CPU-s", lambda r: [r.first.cpu_s] if r.first else []),
        ("idle round, s (median of 10)", lambda r: [statistics.median(f.wall_s for f in r.idle)]),
        ("idle round, CPU-s (median of 10)", lambda r: [statistics.median(f.cpu_s for f in r.idle)]),
    ]
    for share in ("10%", "100%"):
        rows += [(f"{share} of groups commit -> all reported, s", partial(_moved_wall_s, share)),
                 (f"{share} of groups commit -> all reported, CPU-s", partial(_moved_cpu_s, share))]
    lines = [f"# Group poller: `__consumer_offsets` vs admin path, {groups} groups x {PARTITIONS} partitions",
             "", f"{machine}; {repeat} runs per path, alternating; median [min-max].", "",
             "| | " + " | ".join(PATHS) + " |", "|---|" + "---|" * len(PATHS)]
    for label, metric in rows:
        lines.append(f"| {label} | " + " | ".join(
            cell([v for r in runs if r.path == p for v in metric(r)]) for p in PATHS) + " |")
    return "\n".join(lines) + "\n"


def plot(runs: list[PathRun], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = ["idle", "10%", "100%"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for n, p in enumerate(PATHS):
        values = []
        for s in scenarios:
            if s == "idle":
                values.append(statistics.median(f.wall_s for r in runs if r.path == p for f in r.idle))
            else:
                values.append(statistics.median(r.moved[s].wall_s for r in runs if r.path == p))
        # a legend label starting with "_" is hidden by matplotlib
        ax.bar([i + n * 0.4 for i in range(len(scenarios))], values, 0.4, label=f"from {p}")
    ax.set_xticks([i + 0.2 for i in range(len(scenarios))],
                  ["idle round", "10% commit -> reported", "all commit -> reported"])
    ax.set_ylabel("seconds")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("group poller: wall time by path")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.poller_paths")
    parser.add_argument("--groups", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", default=str(project_root() / "bench" / "results" / "poller"))
    args = parser.parse_args(argv)

    def log(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)

    work = cache_dir() / "bench-poller"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cluster = LocalCluster("poller", PORT, work / "kafka", overrides=(("offsets.topic.num.partitions", "50"),))
    jvm: BenchJvm | None = None
    runs: list[PathRun] = []
    try:
        log(f"starting a broker on {PORT} and a bench JVM ...")
        cluster.start()
        jvm = BenchJvm(work / "jvm.log")
        _load(cluster.bootstrap)
        groups = [f"poller-g{g:05d}" for g in range(args.groups)]
        committer = jvm.group_offsets(cluster.config)
        try:
            _commit(committer, groups, lambda i, p: (i + p) % RECORDS + 1)
        finally:
            committer.close()
        log(f"{args.groups} groups committed on {PARTITIONS} partitions each")
        for n in range(args.repeat):
            for path in PATHS if n % 2 == 0 else reversed(PATHS):
                log(f"run {n + 1}/{args.repeat}, {path}:")
                # each scenario commits offsets no earlier one did, so every group really moves
                runs.append(_run_path(path, cluster, jvm, groups, 10 * (2 * n + (path == "admin")), log))
    finally:
        if jvm is not None:
            jvm.close()
        cluster.stop()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    from bench.run import _machine

    (out / f"{stamp}.md").write_text(markdown(runs, args.groups, args.repeat, _machine()))
    (out / f"{stamp}.json").write_text(json.dumps([asdict(r) for r in runs], sort_keys=True) + "\n")
    plot(runs, out / f"{stamp}.png")
    for ext in ("md", "json", "png"):
        shutil.copyfile(out / f"{stamp}.{ext}", out / f"latest.{ext}")
    print((out / f"{stamp}.md").read_text())
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
