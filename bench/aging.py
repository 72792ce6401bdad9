"""`make aging`: a real flow aged to day 1, 7 and 30 in compressed time, measured at each age.

    python -m bench.aging [--day-seconds 120] [--days 1,7,30] [--partitions 100] [--groups 1000]
                          [--rate 500] [--rss-window 120]

A flow's state must follow what is live (retention, groups, partitions), not its age, so the
same commands must cost the same on day 30 as on day 1. This runs the real flow, as `make soak`
does (bench/flow.yaml, micro-batch, `local[2]`, two single-broker clusters), with time
compressed: a day of the flow's life is `day-seconds` of wall time, and every source topic keeps
7 such days (`retention.ms`; a segment a day, so retention can take them; the flow gives its
copies the same). The load is the soak's: half the topics written in transactions (commit
markers leave runs that never merge), half plainly, and a writer on the destination writes a
tenth as many records into the copies of half the plain topics (identical topic names both ways:
the other side's records sit between ours). Every group commits at its topic's log end every 5 s.
The flow's own clocks are not compressed (its upkeep each minute, `offsets.gone_after`): at one
day in two minutes, it keeps up twice a day. What its Delta tables keep of replaced files for
older readers (`streaming.old_versions_retention`, an hour by default) is set to its least, a
minute: an hour of wall time would be a month of these days, and what must level off at the
retention would only show levelling past the run.

At each age in `days` it measures, each as a fresh process where a command is concerned:
`failover --dry-run` with the source gone (its address a closed port), for one group and for
all; `status`; `drill`; start-up to the first copy (the flow stopped and started again: seconds
until the destination grows; the mean of two); the driver's peak resident memory (its process tree) over
`rss-window` seconds of that new process under the load, and its JVM's live heap after a full
collection at the window's end; and the state on disk, per table and per topic (bytes and
files, from the brokers' log directories, the mean of a look every 10 s over the same window: a
compacted topic swings between what it keeps and a segment's worth more). Memory is taken from
the process started at that age,
not from the one running since day 0: a JVM's heap grows towards its limit over its first half
hour whatever it holds, so the long run's peak would measure the JVM's warm-up against the run's
age, not the state's (`make soak` follows one process for an hour). The result,
`bench/results/aging/flow-<UTC time>.md` and `.json` with a plot of each figure over age, is a
table `| metric | day 1 | day 7 | day 30 |`.

The machine bounds the load: 5,000 records/s over 1,000 partitions (the estate of issue 66)
takes more than its two cores, so the default is a tenth of it with the estate's 1,000 groups.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.replicators import Replicator
from bench.result_files import bench_clusters, figure, stamp
from bench.run import _machine
from bench.soak import (
    COMMIT_EVERY_S,
    HERE,
    PER_TOPIC,
    Load,
    LocalWriter,
    Log,
    Writer,
    commit_when_due,
    dr_stream,
    failover_dry_run,
    flow_env,
    log_ends,
    state_on_disk,
)
from bench.workloads import bench_cluster
from dr_stream.dev.clusters import LocalCluster
from dr_stream.kafka import clients
from dr_stream.runtime.paths import project_root

PORTS = (19942, 29942)
RETENTION_DAYS = 7
# What the flow's Delta tables keep of replaced files: the least the flow takes.
OLD_VERSIONS_RETENTION = "1m"
# How often the state on disk is looked at over an age's window.
STATE_LOOK_S = 10.0
# Start-ups measured at each age.
START_UPS = 2


@dataclass
class Age:
    day: float  # the age the measurement began at
    failover_one_s: float | None
    failover_all_s: float | None
    failover_groups: int
    status_s: float
    status_rc: int
    drill_s: float
    drill_rc: int
    start_up_s: float | None
    peak_rss_mib: float
    state: dict[str, tuple[int, int]]  # piece -> (bytes, files)
    live_heap_mib: float | None = None  # the JVM's heap after a full collection, at the window's end
    start_ups: list[float] = field(default_factory=list)  # each start-up measured; `start_up_s` is their mean


@dataclass
class Aging:
    load: Load
    day_s: float
    ages: list[Age] = field(default_factory=list)
    rss_window_s: float = 120.0


def aging_flow(work: Path) -> Path:
    """bench/flow.yaml with the tables' retention of replaced files at its least."""
    import yaml

    flow = yaml.safe_load((HERE / "flow.yaml").read_text())
    flow["streaming"]["old_versions_retention"] = OLD_VERSIONS_RETENTION
    path = work / "aging-flow.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(flow))
    return path


def live_heap_mib(pid: int) -> float | None:
    """The used heap of the JVM in `pid`'s tree after a full collection (`jcmd`), or None."""
    import re

    from bench.replicators import process_tree

    for child in process_tree(pid):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if not command.endswith(b"java"):
            continue
        jcmd = str(Path(command.decode()).parent / "jcmd")
        try:
            subprocess.run([jcmd, str(child), "GC.run"], capture_output=True, timeout=120, check=True)
            info = subprocess.run([jcmd, str(child), "GC.heap_info"], capture_output=True, text=True, timeout=60,
                                  check=True).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        used = [int(k) for k in re.findall(r"(?:PSYoungGen|ParOldGen|garbage-first heap)\s+total \d+K, used (\d+)K",
                                            info)]
        return sum(used) / 1024 if used else None
    return None


def _timed(work: Path, target: LocalCluster, source: str, *args: str) -> tuple[float, int]:
    """A dr-stream command's wall time and exit code, as a fresh process."""
    env = {**os.environ, **flow_env(work, source, target)}
    began = time.monotonic()
    done = subprocess.run([str(project_root() / ".venv" / "bin" / "dr-stream"), *args, "--config",
                           str(HERE / "flow.yaml"), "--json"], capture_output=True, text=True, cwd=project_root(),
                          env=env, timeout=600)
    return time.monotonic() - began, done.returncode


def _start_up(flow: Replicator, target: LocalCluster, topics: list[str], limit_s: float = 300) -> float | None:
    """The flow stopped and started again: seconds from its start until its copies of `topics`
    (none the local writer writes to) grow."""
    flow.stop()
    before = sum(log_ends(target.bootstrap, topics).values())
    flow.start()
    began = time.monotonic()
    while time.monotonic() - began < limit_s:
        flow.check_alive()
        if sum(log_ends(target.bootstrap, topics).values()) > before:
            return time.monotonic() - began
        time.sleep(0.5)
    return None


def _measure(day: float, flow: Replicator, work: Path, source: LocalCluster, target: LocalCluster,
             copied_only: list[str], log: Log) -> Age:
    """The commands and the start-up at `day`; the memory is taken once the started flow has run
    its window (`_memory`)."""
    state = state_on_disk(work, source, target)
    one, _ = failover_dry_run(work, target, "bench-g00000")
    every, groups = failover_dry_run(work, target)
    status_s, status_rc = _timed(work, target, source.bootstrap, "status")
    drill_s, drill_rc = _timed(work, target, source.bootstrap, "drill")
    # Twice, the mean: most of a start is the Spark session's, whose time on a busy machine varies
    # by seconds whatever the state.
    starts = [_start_up(flow, target, copied_only) for _ in range(START_UPS)]
    start_up = None if None in starts else sum(s for s in starts if s is not None) / len(starts)
    age = Age(day, one, every, groups, status_s, status_rc, drill_s, drill_rc, start_up, 0.0, state,
              start_ups=[s for s in starts if s is not None])
    log(f"  day {day:.1f}: failover (source gone) {one or 0:.1f} s for 1 group, {every or 0:.1f} s for {groups}; "
        f"status {status_s:.1f} s; drill {drill_s:.1f} s (exit {drill_rc}); start-up to the first copy "
        f"{start_up or 0:.1f} s; state {sum(b for b, _ in state.values()) / 2**20:,.1f} MiB")
    return age


def _memory(age: Age, flow: Replicator, states: list[dict[str, tuple[int, int]]], log: Log) -> None:
    """The started flow's peak resident memory over its window, and its JVM's live heap now; the
    state on disk, the mean of the window's looks."""
    cost, proc = flow.cost, flow.proc
    cost.sample()
    age.peak_rss_mib = cost.peak_rss / 2**20
    age.live_heap_mib = live_heap_mib(proc.pid)
    if states:
        pieces = sorted({name for state in states for name in state})
        age.state = {name: (round(sum(s.get(name, (0, 0))[0] for s in states) / len(states)),
                            round(sum(s.get(name, (0, 0))[1] for s in states) / len(states))) for name in pieces}
    log(f"  day {age.day:.1f}: the flow started then: peak RSS {age.peak_rss_mib:,.0f} MiB, JVM heap after a full "
        f"collection {age.live_heap_mib or 0:,.0f} MiB; state over the window "
        f"{sum(b for b, _ in age.state.values()) / 2**20:,.1f} MiB")


def age(load: Load, day_s: float, days: list[float], log: Log, rss_window_s: float = 120.0) -> Aging:
    from dr_stream.dev.workload import create_topics

    result = Aging(load, day_s, rss_window_s=rss_window_s)
    day_ms = round(day_s * 1000)
    with bench_clusters("aging", stamp(), PORTS) as (source, target, work, logs):
        create_topics(source.bootstrap, {t: PER_TOPIC for t in load.topics},
                      {"retention.ms": str(RETENTION_DAYS * day_ms), "segment.ms": str(day_ms)})
        writer = Writer(source.bootstrap, load, log)
        plain = [t for t in load.topics if not load.transactional(t)]
        local = LocalWriter(target.bootstrap, plain[::2], load.rate // 10)
        flow = dr_stream(work, source, target, logs / "flow.log", aging_flow(work))
        flow.start()
        threads = [threading.Thread(target=writer.run, name="aging-writer", daemon=True),
                   threading.Thread(target=local.run, name="aging-local-writer", daemon=True)]
        threads[0].start()
        admin = clients.admin(bench_cluster(target.bootstrap))
        while not set(plain[::2]) <= set(admin.list_topics(timeout=10).topics):  # the flow made its copies
            flow.check_alive()
            time.sleep(1)
        threads[1].start()
        began = time.monotonic()
        try:
            next_commit, pending = began, sorted(days)
            window: tuple[Age, float] | None = None  # an age whose memory is taken when its window ends
            states: list[dict[str, tuple[int, int]]] = []  # the window's looks at the state on disk
            next_look = 0.0
            while pending or window:
                flow.check_alive()
                now = time.monotonic()
                next_commit = commit_when_due(next_commit, now, source.bootstrap, load, log)
                day = (now - began) / day_s
                if window and now >= next_look:
                    states.append(state_on_disk(work, source, target))
                    next_look = now + STATE_LOOK_S
                if window and now >= window[1]:
                    _memory(window[0], flow, states, log)
                    window, states = None, []
                if pending and not window and day >= pending[0]:
                    pending.pop(0)
                    measured = _measure(day, flow, work, source, target,
                                        [t for t in load.topics if t not in local.topics], log)
                    result.ages.append(measured)
                    window = (measured, time.monotonic() + rss_window_s)
                time.sleep(0.5)
        finally:
            writer.stop.set()
            local.stop.set()
            for t in threads:
                t.join(60)
            flow.stop()
            writer.close()
            local.close()
    return result


def _mib(piece: tuple[int, int]) -> str:
    return f"{piece[0] / 2**20:,.2f} MiB ({piece[1]:,} files)"


def rows(result: Aging) -> list[tuple[str, list[str]]]:
    """(metric, its value at each age), in the issue's names."""
    ages = result.ages

    def seconds(values: list[float | None]) -> list[str]:
        return ["-" if v is None else f"{v:.2f} s" for v in values]

    out = [("failover, source gone, 1 group", seconds([a.failover_one_s for a in ages])),
           (f"failover, source gone, {result.load.groups:,} groups", seconds([a.failover_all_s for a in ages])),
           ("start-up to the first copy", seconds([a.start_up_s for a in ages])),
           ("status", [f"{a.status_s:.2f} s (exit {a.status_rc})" for a in ages]),
           ("drill", [f"{a.drill_s:.2f} s (exit {a.drill_rc})" for a in ages]),
           ("driver peak RSS", [f"{a.peak_rss_mib:,.0f} MiB" for a in ages]),
           ("driver JVM heap after a full collection",
            ["-" if a.live_heap_mib is None else f"{a.live_heap_mib:,.0f} MiB" for a in ages]),
           ("state on disk, all", [_mib((sum(b for b, _ in a.state.values()), sum(f for _, f in a.state.values())))
                                   for a in ages])]
    pieces = sorted({name for a in ages for name in a.state})
    out += [(f"state on disk, {name}", [_mib(a.state.get(name, (0, 0))) for a in ages]) for name in pieces]
    return out


def markdown(result: Aging, png: str) -> str:
    load = result.load
    header = " | ".join(f"day {a.day:.1f}" for a in result.ages)
    lines = [f"# Aging, a real flow in compressed time, {stamp()}", "",
             f"{_machine()}. dr-stream (bench/flow.yaml, micro-batch, `local[2]`), a day every {result.day_s:g} s "
             f"of wall time, every topic keeping {RETENTION_DAYS} days: {load.rate:,} records/s over "
             f"{load.partitions:,} partitions (half the topics transactional; a tenth as many local records "
             f"written into the destination's copies of half the plain ones, as identical names both ways leave), "
             f"{load.groups:,} groups committing every {COMMIT_EVERY_S:g} s; the tables keep replaced files "
             f"{OLD_VERSIONS_RETENTION} (`streaming.old_versions_retention`). Each age is when its measurement "
             "began; each measurement takes a few of these compressed days. Memory is the flow's started at "
             f"that age, over its first {result.rss_window_s:g} s under the load.", "",
             f"![each figure over age]({png})", "",
             f"| metric | {header} |", "|---|" + "---:|" * len(result.ages)]
    lines += [f"| {name} | {' | '.join(values)} |" for name, values in rows(result)]
    return "\n".join(lines) + "\n"


def plot(result: Aging, png: Path) -> None:
    days = [a.day for a in result.ages]
    series = [("failover 1 group s", [a.failover_one_s or 0 for a in result.ages]),
              ("failover all groups s", [a.failover_all_s or 0 for a in result.ages]),
              ("start-up s", [a.start_up_s or 0 for a in result.ages]),
              ("status s", [a.status_s for a in result.ages]),
              ("drill s", [a.drill_s for a in result.ages]),
              ("peak RSS GiB", [a.peak_rss_mib / 1024 for a in result.ages]),
              ("state on disk 100 MiB", [sum(b for b, _ in a.state.values()) / 2**20 / 100 for a in result.ages])]
    with figure(png, size=(8, 5)) as ax:
        for label, values in series:
            ax.plot(days, values, marker="o", label=label)
        ax.set_xlabel("age, days (compressed)")
        ax.set_ylim(bottom=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--day-seconds", type=float, default=120)
    parser.add_argument("--days", default="1,7,30", help="the ages to measure at, comma-separated")
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--rate", type=int, default=500, help="records per second")
    parser.add_argument("--rss-window", type=float, default=120,
                        help="seconds the flow started at each age runs before its memory is taken")
    args = parser.parse_args(argv)
    load = Load(args.partitions, args.groups, args.rate)
    days = [float(d) for d in args.days.split(",")]
    print(f"aging: a day every {args.day_seconds:g} s to day {max(days):g}; {load.rate:,} records/s over "
          f"{load.partitions:,} partitions, {load.groups:,} groups", flush=True)
    result = age(load, args.day_seconds, days, lambda line: print(line, flush=True), args.rss_window)
    out = Path(__file__).resolve().parent / "results" / "aging"
    name = f"flow-{stamp()}"
    out.mkdir(parents=True, exist_ok=True)
    plot(result, out / f"{name}.png")
    (out / f"{name}.json").write_text(json.dumps(asdict(result), indent=1) + "\n")
    (out / f"{name}.md").write_text(markdown(result, f"{name}.png"))
    print(out / f"{name}.md")
    print(json.dumps({name: values for name, values in rows(result)}, indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
