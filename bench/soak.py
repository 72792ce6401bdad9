"""`make soak`: a real flow for an hour under a steady mixed load, with a broker restart every 10 minutes.

    python -m bench.soak [--minutes 60] [--interval 5] [--restart-every 10] [--partitions 100]
                         [--groups 200] [--rate 500]

Two single-broker clusters and dr-stream as `make bench-scale` runs it (bench/flow.yaml, micro-
batch, `local[2]`). A writer sends `rate` records a second over `partitions` partitions in
topics of 10: half the topics are written in transactions of a tenth of a second (a
transactional source, whose commit markers leave runs that never merge), half plainly, and a
writer on the destination writes a tenth as many records of its own into the copies of half the
plain topics (identical topic names both ways: the other side's records sit between the copies,
so those runs never merge either). Every group commits at its topic's log end every 5 s. Every
`restart-every` minutes a broker restarts, the destination's and the source's in turn.

At each `interval` it records the flow's process tree (resident memory, CPU-seconds), the records
copied and the CPU per thousand of them, the state the flow keeps on disk (bytes and files of each
of its tables and of the checkpoints; of its topics on the destination and `__consumer_timestamps`
on the source, from the brokers' log directories), and how long a fresh process takes to read the
translation log's positions, which is what `failover` with the source gone reads. At the end,
with the writers stopped and the copy caught up, every record the source holds must be on the
destination exactly once (values are unique; the destination's own records are left out), and
the flow's memory over the last 10 minutes is set against minutes 10-20.

Results (`<UTC time>.md`, `.json`, `.png`, `latest.*`) go under bench/results/soak/; every
process started is stopped by its PID. The destination's writer stands for the flow the other
way, which is not run: on two cores it would halve the load either flow can carry.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.replicators import Replicator
from bench.result_files import bench_clusters, stamp, write_results
from bench.run import _machine
from bench.workloads import bench_cluster
from dr_stream.dev.clusters import LocalCluster
from dr_stream.dev.workload import Positions, commit_positions
from dr_stream.kafka import clients
from dr_stream.runtime.paths import project_root

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "soak"
PORTS = (19892, 29892)
PER_TOPIC = 10
COMMIT_EVERY_S = 5.0
Log = Callable[[str], None]

_READ = """
import json, sys, time
from dr_stream.positions.translation_log import TranslationLog
from dr_stream.runtime.delta_reads import DeltaReads
began = time.monotonic(); latest = TranslationLog(sys.argv[1], DeltaReads(None)).latest()
print(json.dumps({"seconds": time.monotonic() - began, "positions": len(latest)}))
"""


@dataclass(frozen=True)
class Load:
    partitions: int
    groups: int
    rate: int

    @property
    def topics(self) -> list[str]:
        return [f"sc.t{i:03d}" for i in range(max(1, self.partitions // PER_TOPIC))]

    def transactional(self, topic: str) -> bool:
        return self.topics.index(topic) % 2 == 1

    def groups_of(self) -> dict[str, str]:
        """group -> the topic it reads (group i reads topic i mod topics)."""
        topics = self.topics
        return {f"bench-g{i:05d}": topics[i % len(topics)] for i in range(self.groups)}


@dataclass
class Interval:
    minute: float
    rss_mib: float
    cpu_s: float
    copied: int
    cpu_ms_per_1k: float | None
    state: dict[str, tuple[int, int]]  # piece -> (bytes, files)
    failover_read_s: float | None
    failover_s: float | None
    failover_groups: int
    restarts: int


@dataclass
class Soak:
    load: Load
    minutes: float
    intervals: list[Interval] = field(default_factory=list)
    written: int = 0
    not_written: int = 0
    restarts: list[str] = field(default_factory=list)
    source_records: int = 0
    destination_records: int = 0
    missing: int = 0
    local_records: int = 0  # the destination's own, written beside the copies
    duplicated: int = 0

    def rss_ratio(self) -> float | None:
        """Mean RSS over the last 10 minutes / over minutes 10-20 (flat: within 1.1)."""
        early = [i.rss_mib for i in self.intervals if 10 <= i.minute <= 20]
        late = [i.rss_mib for i in self.intervals if i.minute >= self.minutes - 10]
        if not early or not late:
            return None
        return (sum(late) / len(late)) / (sum(early) / len(early))


class Writer:
    """Sends the load's records until stopped; each value is unique (a sequence number)."""

    def __init__(self, bootstrap: str, load: Load, log: Log) -> None:
        self.load, self.log = load, log
        cluster = bench_cluster(bootstrap)
        self.plain = clients.producer(cluster, {"linger.ms": 20})
        self.txn = clients.producer(cluster, {"linger.ms": 5, "transactional.id": "soak-writer"})
        self.seq = 0
        self.placed = [0, 0]  # records placed so far: plain, transactional
        self.written = self.not_written = 0
        self.stop = threading.Event()

    def _place(self, topics: list[str], kind: int) -> tuple[str, int]:
        """The next (topic, partition) of one kind of topics: round the topics, and each topic
        round its partitions (the same counter for both would pair a topic with a few of them)."""
        n = self.placed[kind]
        self.placed[kind] += 1
        return topics[n % len(topics)], (n // len(topics)) % PER_TOPIC

    def _value(self) -> bytes:
        self.seq += 1
        return f"{self.seq:012d}".encode().ljust(100, b".")

    def run(self) -> None:
        topics = self.load.topics
        plain = [t for t in topics if not self.load.transactional(t)]
        txn = [t for t in topics if self.load.transactional(t)]
        per_tick = max(1, self.load.rate // 10)
        self.txn.init_transactions(60)
        while not self.stop.is_set():
            began = time.monotonic()
            for _ in range(per_tick // 2):
                topic, partition = self._place(plain, 0)
                self.plain.produce(topic, self._value(), partition=partition)
            self.plain.poll(0)
            try:
                self.txn.begin_transaction()
                for _ in range(per_tick - per_tick // 2):
                    topic, partition = self._place(txn, 1)
                    self.txn.produce(topic, self._value(), partition=partition)
                self.txn.commit_transaction(30)
                self.written += per_tick - per_tick // 2
            except Exception as exc:  # a broker restarting: the transaction is aborted, its records never read
                self.not_written += per_tick - per_tick // 2
                self.log(f"  writer: a transaction aborted ({str(exc).splitlines()[0][:120]})")
                try:
                    self.txn.abort_transaction(30)
                except Exception:
                    self.stop.wait(1)
            self.written += per_tick // 2
            self.stop.wait(max(0.0, 0.1 - (time.monotonic() - began)))
        self.plain.flush(60)

    def close(self) -> None:
        self.plain.close()
        self.txn.close()


def log_ends(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    admin = clients.admin(bench_cluster(bootstrap))
    wanted = {TopicPartition(t, p): OffsetSpec.latest() for t in topics for p in range(PER_TOPIC)}
    futures = admin.list_offsets(wanted, request_timeout=30)
    return {(tp.topic, tp.partition): f.result(timeout=60).offset for tp, f in futures.items()}


def commit_at_ends(bootstrap: str, load: Load) -> None:
    ends = log_ends(bootstrap, load.topics)
    positions: Positions = {g: {(t, p): ends[(t, p)] for p in range(PER_TOPIC)} for g, t in load.groups_of().items()}
    commit_positions(bootstrap, positions, timeout_s=60)


def commit_when_due(next_commit: float, now: float, bootstrap: str, load: Load, log: Log) -> float:
    """Every group committed at its topic's log end once `next_commit` has come; the next one's time."""
    if now < next_commit:
        return next_commit
    try:
        commit_at_ends(bootstrap, load)
    except Exception as exc:  # a broker restarting or busy: the next commit is 5 s away
        log(f"  groups: not committed this time ({str(exc).splitlines()[0][:120]})")
    return now + COMMIT_EVERY_S


def on_disk(path: Path) -> tuple[int, int]:
    """Bytes allocated (a broker's index files are sparse, preallocated to 10 MiB) and files. The
    flow writes while this looks: a file gone between the listing and its look (a checkpoint's
    temporary file, a segment retention took) is not counted."""
    allocated, files = 0, 0
    for directory, _, names in os.walk(path):  # a directory gone meanwhile is skipped, not raised
        for name in names:
            try:
                allocated, files = allocated + os.stat(os.path.join(directory, name)).st_blocks * 512, files + 1
            except FileNotFoundError:
                continue
    return allocated, files


def state_on_disk(work: Path, source: LocalCluster, target: LocalCluster) -> dict[str, tuple[int, int]]:
    """(bytes, files) of each table and of the checkpoints, and of each topic the flow keeps on
    the destination and `__consumer_timestamps` on the source."""
    state = {piece.name: on_disk(piece) for piece in sorted((work / "state").iterdir()) if piece.is_dir()} \
        if (work / "state").exists() else {}
    for cluster, prefix in ((target, "__dr_stream"), (source, "__consumer_timestamps")):
        for d in sorted((cluster.home / "data").iterdir()):
            if d.name.startswith(prefix):
                name = f"{d.name.rsplit('-', 1)[0]} ({cluster.alias})"
                size, files = state.get(name, (0, 0))
                found = on_disk(d)
                state[name] = (size + found[0], files + found[1])
    return state


def failover_dry_run(work: Path, target: LocalCluster, group: str | None = None) -> tuple[float | None, int]:
    """`failover --dry-run` of every group (or those `group` matches) with the source gone (its
    address a closed port): seconds, groups it would move."""
    env = {**os.environ, **flow_env(work, "127.0.0.1:1", target)}
    began = time.monotonic()
    done = subprocess.run([str(project_root() / ".venv" / "bin" / "dr-stream"), "failover", "--config",
                           str(HERE / "flow.yaml"), "--dry-run", "--json", *(["--group", group] if group else [])],
                          capture_output=True, text=True, cwd=project_root(), env=env, timeout=600)
    seconds = time.monotonic() - began
    try:
        plan = json.loads(done.stdout)
    except ValueError:
        return None, 0
    if plan.get("source_reachable"):
        raise RuntimeError("failover reached a source given as a closed port")
    return seconds, len({row["group"] for row in plan["positions"]})


def _failover_read(work: Path) -> float | None:
    done = subprocess.run([sys.executable, "-c", _READ, str(work / "state" / "translations")], capture_output=True,
                          text=True, cwd=project_root())
    if done.returncode != 0:
        return None
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])


# What the destination's own records start with: no source value does (those are sequence numbers).
LOCAL = b"local-"


class LocalWriter:
    """The other side's own records, written into the destination's copies of `topics` (the
    shape identical topic names both ways leave on a partition); each value is unique and starts
    with `LOCAL`, so a check of what was copied leaves them out."""

    def __init__(self, bootstrap: str, topics: list[str], rate: int) -> None:
        self.topics, self.rate = topics, max(1, rate)
        self.producer = clients.producer(bench_cluster(bootstrap), {"linger.ms": 20})
        self.stop = threading.Event()
        self.written = 0

    def run(self) -> None:
        while not self.stop.is_set():
            began = time.monotonic()
            for _ in range(max(1, self.rate // 10)):
                self.written += 1
                self.producer.produce(self.topics[self.written % len(self.topics)],
                                      LOCAL + str(self.written).encode(), partition=self.written % PER_TOPIC)
            self.producer.poll(0)
            self.stop.wait(max(0.0, 0.1 - (time.monotonic() - began)))
        self.producer.flush(30)

    def close(self) -> None:
        self.producer.close()


def values(bootstrap: str, topics: list[str]) -> list[bytes]:
    """Every committed record's value on the cluster's copies of `topics`."""
    from confluent_kafka import TopicPartition

    ends = log_ends(bootstrap, topics)
    consumer = clients.consumer(bench_cluster(bootstrap), "soak-check",
                                {"isolation.level": "read_committed", "enable.partition.eof": True})
    out: list[bytes] = []
    try:
        for (topic, partition), end in ends.items():
            if end == 0:
                continue
            consumer.assign([TopicPartition(topic, partition, 0)])
            while True:
                message = consumer.poll(10)
                if message is None or message.error():
                    break
                out.append((message.value() or b"")[:12])
                if (message.offset() or 0) >= end - 1:
                    break
    finally:
        consumer.close()
    return out


def flow_env(work: Path, source: str, target: LocalCluster) -> dict[str, str]:
    return {"BENCH_SOURCE": source, "BENCH_TARGET": target.bootstrap, "BENCH_WORK": str(work / "state"),
            "BENCH_TOPICS": r"sc\..*", "BENCH_TRIGGER": "1s", "BENCH_MAX_TRIGGER": "30s", "BENCH_MODE": "microbatch",
            "DR_STREAM_MASTER": "local[2]", "DR_STREAM_DRIVER_MEMORY": "2g"}


def await_copied(bootstrap: str, topics: list[str], log: Log, quiet_s: float = 30, limit_s: float = 300) -> None:
    """Until the destination's copies stop growing for `quiet_s`: the source's log ends are no
    measure of what must arrive, its commit markers take offsets that are never copied."""
    began, ends, since = time.monotonic(), -1, time.monotonic()
    while time.monotonic() - since < quiet_s:
        now = sum(log_ends(bootstrap, topics).values())
        if now != ends:
            ends, since = now, time.monotonic()
        if time.monotonic() - began > limit_s:
            log(f"  the copy still grew after {limit_s:.0f} s; checking what is there")
            return
        time.sleep(5)


def dr_stream(work: Path, source: LocalCluster, target: LocalCluster, log_file: Path,
              config: Path = HERE / "flow.yaml") -> Replicator:
    env = flow_env(work, source.bootstrap, target)
    python = project_root() / ".venv" / "bin" / "python"
    return Replicator("dr-stream", [str(python), "-m", "dr_stream.cli", "run", "--config", str(config)],
                      env, log_file)


def soak(load: Load, minutes: float, interval_min: float, restart_every_min: float, log: Log) -> Soak:
    from dr_stream.dev.workload import create_topics

    result = Soak(load, minutes)
    when = stamp()
    with bench_clusters("soak", when, PORTS) as (source, target, work, logs):
        create_topics(source.bootstrap, {t: PER_TOPIC for t in load.topics})
        writer = Writer(source.bootstrap, load, log)
        plain = [t for t in load.topics if not load.transactional(t)]
        local = LocalWriter(target.bootstrap, plain[::2], load.rate // 10)
        flow = dr_stream(work, source, target, logs / "flow.log")
        threads = [threading.Thread(target=writer.run, name="soak-writer", daemon=True),
                   threading.Thread(target=local.run, name="soak-local-writer", daemon=True)]
        flow.start()
        began = time.monotonic()
        threads[0].start()
        admin = clients.admin(bench_cluster(target.bootstrap))
        while not set(local.topics) <= set(admin.list_topics(timeout=10).topics):  # the flow made its copies
            flow.check_alive()
            time.sleep(1)
        threads[1].start()
        try:
            copied_before, cpu_before = 0, 0.0
            next_commit, next_sample = began, began + interval_min * 60
            next_restart = began + restart_every_min * 60
            while time.monotonic() - began < minutes * 60:
                flow.check_alive()
                now = time.monotonic()
                next_commit = commit_when_due(next_commit, now, source.bootstrap, load, log)
                # measured before a restart due at the same moment: a failover read of a broker coming
                # back measures the restart
                if now >= next_sample:
                    next_sample = now + interval_min * 60
                    cost = flow.cost
                    assert cost is not None  # started
                    cost.sample()
                    copied = sum(log_ends(target.bootstrap, load.topics).values())
                    cpu = cost.cpu_seconds
                    step = Interval((now - began) / 60, cost.rss / 2**20, cpu, copied,
                                    (cpu - cpu_before) * 1000 / ((copied - copied_before) / 1000)
                                    if copied > copied_before else None,
                                    state_on_disk(work, source, target), _failover_read(work),
                                    *failover_dry_run(work, target), len(result.restarts))
                    copied_before, cpu_before = copied, cpu
                    result.intervals.append(step)
                    total = sum(b for b, _ in step.state.values()) / 2**20
                    log(f"  {step.minute:.0f} min: RSS {step.rss_mib:,.0f} MiB, {copied:,} copied, "
                        f"CPU {step.cpu_ms_per_1k or 0:.0f} ms per 1,000, state {total:,.1f} MiB, "
                        f"translation log read {step.failover_read_s or 0:.2f} s, failover (source gone) "
                        f"{step.failover_s or 0:.1f} s for {step.failover_groups} groups")
                if now >= next_restart:
                    next_restart = now + restart_every_min * 60
                    broker = (target, source)[len(result.restarts) % 2]
                    log(f"  {(now - began) / 60:.1f} min: restarting {broker.alias}")
                    broker.stop()
                    broker.start()
                    result.restarts.append(f"{(now - began) / 60:.1f} min {broker.alias}")
                time.sleep(0.5)
            writer.stop.set()
            local.stop.set()
            for t in threads:
                t.join(120)
            result.written, result.not_written = writer.written, writer.not_written
            result.local_records = local.written
            await_copied(target.bootstrap, load.topics, log)
            on_source = values(source.bootstrap, load.topics)
            on_destination = [v for v in values(target.bootstrap, load.topics) if not v.startswith(LOCAL)]
            result.source_records, result.destination_records = len(on_source), len(on_destination)
            seen = set(on_destination)
            result.missing = len(set(on_source) - seen)
            result.duplicated = len(on_destination) - len(seen)
            log(f"  end: {len(on_source):,} records on the source, {len(on_destination):,} on the destination, "
                f"{result.missing} missing, {result.duplicated} copied twice")
        finally:
            writer.stop.set()
            local.stop.set()
            flow.stop()
            writer.close()
            local.close()
    return result


def markdown(result: Soak, when: str, png: str) -> str:
    load = result.load
    ratio = result.rss_ratio()
    lines = [f"# Soak, {when}", "",
             f"{_machine()}. dr-stream (bench/flow.yaml, micro-batch, `local[2]`) for {result.minutes:g} minutes: "
             f"{load.rate:,} records/s over {load.partitions:,} partitions (half the topics transactional; "
             f"{result.local_records:,} records of the destination's own written into the copies of a quarter of "
             "them, as identical topic names both ways leave), "
             f"{load.groups:,} groups committing every {COMMIT_EVERY_S:g} s, a broker restart every so often "
             f"({', '.join(result.restarts) or 'none'}).", "",
             f"- records: {result.source_records:,} on the source, {result.destination_records:,} on the destination, "
             f"{result.missing} missing, {result.duplicated} copied twice ({result.not_written:,} in transactions "
             "the writer aborted, never visible)",
             f"- resident memory, last 10 minutes / minutes 10-20: {'-' if ratio is None else f'{ratio:.2f}'}", "",
             f"![resident memory, CPU per record, state on disk, the translation log's read and failover over "
             f"time]({png})", "",
             "| minute | RSS MiB | CPU ms per 1,000 records | records copied | state MiB (files) | "
             "translation log read s | failover, source gone: s (groups) |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for i in result.intervals:
        size = sum(b for b, _ in i.state.values()) / 2**20
        files = sum(f for _, f in i.state.values())
        cpu = "-" if i.cpu_ms_per_1k is None else f"{i.cpu_ms_per_1k:.0f}"
        read = "-" if i.failover_read_s is None else f"{i.failover_read_s:.2f}"
        failover = "-" if i.failover_s is None else f"{i.failover_s:.1f} ({i.failover_groups})"
        lines.append(f"| {i.minute:.0f} | {i.rss_mib:,.0f} | {cpu} | {i.copied:,} | {size:,.1f} ({files:,}) | {read} | "
                     f"{failover} |")
    if result.intervals:
        last = result.intervals[-1]
        lines += ["", "State at the end, by piece:", "", "| piece | MiB | files |", "|---|---:|---:|"]
        lines += [f"| {name} | {b / 2**20:,.2f} | {f:,} |" for name, (b, f) in sorted(last.state.items())]
    return "\n".join(lines) + "\n"


def plot(result: Soak, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [i.minute for i in result.intervals]
    fig, axes = plt.subplots(5, 1, figsize=(8, 12), sharex=True)
    series = [("RSS MiB", [i.rss_mib for i in result.intervals]),
              ("CPU ms / 1,000 records", [i.cpu_ms_per_1k or 0 for i in result.intervals]),
              ("state on disk MiB", [sum(b for b, _ in i.state.values()) / 2**20 for i in result.intervals]),
              ("translation log read s", [i.failover_read_s or 0 for i in result.intervals]),
              ("failover, source gone s", [i.failover_s or 0 for i in result.intervals])]
    for axis, (label, values) in zip(axes, series, strict=True):
        axis.plot(minutes, values, marker="o")
        axis.set_ylabel(label)
        axis.set_ylim(bottom=0)
    axes[-1].set_xlabel("minutes")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--interval", type=float, default=5, help="minutes between measurements")
    parser.add_argument("--restart-every", type=float, default=10, help="minutes between broker restarts")
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--rate", type=int, default=500, help="records per second")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    load = Load(args.partitions, args.groups, args.rate)
    print(f"soak: {args.minutes:g} minutes, {load.rate:,} records/s over {load.partitions:,} partitions, "
          f"{load.groups:,} groups", flush=True)
    result = soak(load, args.minutes, args.interval, args.restart_every, lambda line: print(line, flush=True))
    when = stamp()
    from dataclasses import asdict
    report = write_results(args.out, when, lambda png: markdown(result, when, png), asdict(result),
                           lambda png: plot(result, png))
    print(report)
    return 0 if result.missing == 0 and result.duplicated == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
