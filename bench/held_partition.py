"""`make bench-held`: one partition held at a refused record while every other one copies.

    python -m bench.held_partition [--partitions 1000] [--rate 1000] [--seconds 60] [--warm 240]

One source and one destination cluster of its own, topics of 10 partitions, a steady `rate`
records/s of 128 B spread evenly over every partition, each stamped with its send time (the
trickle of `bench.trickle`). The destination's copy of the first topic is created beforehand
with `message.timestamp.before.max.ms` of one hour, a setting the source does not have, so it
refuses a record two hours old. The flow (bench/flow.yaml, micro-batch, trigger 1 s fixed,
`local[2]`) runs; after a warm-up, three windows of `seconds`:

1. none held;
2. the first topic's partition 0 held: a record stamped two hours ago is sent there;
3. after `dr-stream skip` of that record: none held again.

In each: the end-to-end latency (a consumer on the destination: receive time - send time) p50
and p99 of every record of the other partitions, and the flow's CPU. Writes `<UTC time>.md`,
`.json`, `.png` and `latest.*` under `--out`; stops every process it started by its PID.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition

from bench.batch_cost import flow_env
from bench.replicators import dr_stream
from bench.result_files import bench_clusters, figure, stamp, write_results
from bench.trickle import PER_TOPIC, Trickle
from bench.workloads import create_topics, percentile, wait_topic
from dr_stream.background import Background
from dr_stream.core.config import ClusterConfig
from dr_stream.dev.clusters import LocalCluster
from dr_stream.kafka import admin, clients
from dr_stream.runtime.paths import project_root

HERE = Path(__file__).resolve().parent
PORTS = (19792, 29792)
HOUR_MS = 3_600_000


@dataclass
class Window:
    name: str
    p50_ms: float
    p99_ms: float
    records: int
    cores_busy: float


class TimedTrickle(Trickle):
    """The trickle, its consumer keeping each record's partition as well."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.timed: list[tuple[str, int, float, float]] = []  # (topic, partition, sent at, latency ms)

    def consume(self) -> None:
        for topic in self.topics:
            wait_topic(self.target.bootstrap, topic, PER_TOPIC)
        consumer = clients.consumer(ClusterConfig(self.target.alias, self.target.bootstrap), "bench-held",
                                    {"enable.auto.commit": False, "fetch.wait.max.ms": 5})
        consumer.assign([TopicPartition(t, p, 0) for t in self.topics for p in range(PER_TOPIC)])
        try:
            while not self.stop.is_set():
                msg = consumer.poll(0.1)
                if msg is not None and msg.error() is None and len(msg.value() or b"") >= 8:
                    sent_ns = struct.unpack(">q", (msg.value() or b"")[:8])[0]
                    self.timed.append((msg.topic() or "", msg.partition() or 0, sent_ns / 1e9,
                                       (time.time_ns() - sent_ns) / 1e6))
        finally:
            consumer.close()


def wait_for_line(log_file: Path, text: str, after: int, timeout_s: float = 180) -> int:
    """Waits for `text` in the flow's log past character `after`; where it ends."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = log_file.read_text(errors="replace").find(text, after)
        if found >= 0:
            return found + len(text)
        time.sleep(0.5)
    raise TimeoutError(f"{log_file}: no {text!r} within {timeout_s:g} s")


def measure(args: argparse.Namespace, source: LocalCluster, target: LocalCluster, work: Path,
            logs: Path) -> list[Window]:
    topics = [f"held.t{i:03d}" for i in range(max(1, args.partitions // PER_TOPIC))]
    create_topics(source.bootstrap, {t: PER_TOPIC for t in topics})
    admin.create_topic(clients.admin(ClusterConfig(target.alias, target.bootstrap)), topics[0], PER_TOPIC,
                       {"message.timestamp.before.max.ms": str(HOUR_MS)})
    log_file = logs / "held.log"
    env = {**flow_env(work, source, target, r"held\..*"), "BENCH_MAX_TRIGGER": "1s"}
    flow, trickle = dr_stream(HERE / "flow.yaml", env, log_file), TimedTrickle(source, target, topics, args.rate)
    flow.start()
    workers = [Background("trickle producer", trickle.produce).start(),
               Background("trickle consumer", trickle.consume).start()]
    held = (topics[0], 0)
    windows: list[Window] = []

    def window(name: str) -> None:
        flow.check_alive()
        flow.cost.sample()
        began, cpu = time.time(), flow.cost.cpu_seconds
        time.sleep(args.seconds)
        flow.cost.sample()
        ended = time.time()
        time.sleep(10)  # the window's last records reach the destination
        latencies = [ms for t, p, at, ms in list(trickle.timed) if began <= at < ended and (t, p) != held]
        windows.append(Window(name, percentile(latencies, 50), percentile(latencies, 99), len(latencies),
                              (flow.cost.cpu_seconds - cpu) / (ended - began)))
        w = windows[-1]
        print(f"  {name}: p50 {w.p50_ms:.0f} ms, p99 {w.p99_ms:.0f} ms over {w.records:,} records, "
              f"{w.cores_busy:.2f} cores busy", flush=True)

    try:
        time.sleep(args.warm)
        window("none held")
        producer = clients.producer(ClusterConfig(source.alias, source.bootstrap))
        old = int(time.time() * 1000) - 2 * HOUR_MS
        producer.produce(held[0], struct.pack(">q", time.time_ns()), partition=0, timestamp=old)
        producer.flush(30)
        at = wait_for_line(log_file, "query restart: replicate query running", wait_for_line(log_file, "HELD: ", 0))
        time.sleep(10)
        window(f"{held[0]}[0] held")
        said = log_file.read_text(errors="replace").split("HELD: ", 1)[1]
        offset = int(said.split("held at offset ", 1)[1].split()[0])
        done = subprocess.run([str(project_root() / ".venv" / "bin" / "python"), "-m", "dr_stream.cli", "skip",
                               "--config", str(HERE / "flow.yaml"), "--topic", held[0], "--partition", "0",
                               "--offset", str(offset)], env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"dr-stream skip failed: {done.stderr[-2000:]}")
        wait_for_line(log_file, "query restart: replicate query running", wait_for_line(log_file, "goes on from", at))
        time.sleep(10)
        window("after the skip")
    finally:
        trickle.stop.set()
        for worker in workers:
            worker.join(30)
        flow.stop()
        for cluster in (source, target):
            admin.delete_topics(clients.admin(ClusterConfig(cluster.alias, cluster.bootstrap)), topics)
        shutil.rmtree(work, ignore_errors=True)
    return windows


def markdown(windows: list[Window], args: argparse.Namespace, when: str, png: str) -> str:
    lines = [
        f"# One partition held at a refused record among {args.partitions} ({when})",
        "",
        f"`make bench-held`: bench/flow.yaml in micro-batch mode, trigger 1 s fixed, `local[2]`, both single-broker "
        f"clusters on this machine (2 cores); {args.rate} records/s of 128 B spread evenly over {args.partitions} "
        f"partitions, {args.seconds:.0f} s per window after a {args.warm:.0f} s warm-up. Latency of the records of "
        "every partition but the held one.",
        "",
        "| window | latency p50 ms | latency p99 ms | records timed | cores busy |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [f"| {w.name} | {w.p50_ms:.0f} | {w.p99_ms:.0f} | {w.records:,} | {w.cores_busy:.2f} |" for w in windows]
    return "\n".join([*lines, "", f"![held partition]({png})", ""])


def plot(windows: list[Window], png: Path) -> None:
    with figure(png) as ax:
        names = [w.name for w in windows]
        ax.bar([n - 0.2 for n in range(len(windows))], [w.p50_ms for w in windows], 0.4, label="p50")
        ax.bar([n + 0.2 for n in range(len(windows))], [w.p99_ms for w in windows], 0.4, label="p99")
        ax.set_xticks(range(len(windows)), names)
        ax.set_ylabel("end-to-end latency of the other partitions, ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.held_partition", description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0)
    # 1,000 partitions on 2 cores take minutes to reach their steady latency (JIT, the pooled consumers)
    parser.add_argument("--warm", type=float, default=240.0)
    parser.add_argument("--out", type=Path, default=project_root() / "bench" / "results" / "held")
    args = parser.parse_args(argv)
    began, when = time.monotonic(), stamp()
    with bench_clusters("held", when, PORTS) as (source, target, work, logs):
        windows = measure(args, source, target, work / "flow", logs)
    report = write_results(args.out, when, partial(markdown, windows, args, time.strftime("%Y-%m-%d %H:%M UTC")),
                           [asdict(w) for w in windows], partial(plot, windows))
    print(report.read_text())
    print(f"bench took {(time.monotonic() - began) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
