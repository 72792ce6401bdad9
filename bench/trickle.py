"""`make bench-trickle`: a trickle over many partitions, with the trigger fixed and allowed to widen.

    python -m bench.trickle [--partitions 300] [--rate 600] [--seconds 120] [--repeat 3]

One source and one destination cluster of its own, topics of 10 partitions. The flow
(bench/flow.yaml, micro-batch, trigger 1 s, `local[2]`) copies a steady `rate` records/s spread
evenly over every partition, each record stamped with its send time. Each repeat runs it twice,
in alternating order: with the trigger fixed (`streaming.max_trigger` 1 s) and allowed to widen
(the default, 30 s). After a warm-up long enough for the cold first batch and a widening's
restart (90 s), for `seconds`:

* cores busy: the flow's process tree's CPU-seconds per second (driver and Spark JVM);
* batches per minute, their median wall time (Spark's `triggerExecution`) and records;
* each record's end-to-end latency (a consumer on the destination: receive time - send time),
  p50 and p99, over the records sent in the window;
* the trigger the flow ended on (from its `trigger A -> B` line).

Writes `<UTC time>.md`, `.json`, `.png` and `latest.*` under `--out`; stops every process it
started by its PID.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition

from bench.batch_cost import FlowLog, flow_env
from bench.replicators import dr_stream
from bench.result_files import bench_clusters, figure, stamp, write_results
from bench.workloads import create_topics, percentile, wait_topic
from dr_stream.background import Background
from dr_stream.core.config import ClusterConfig
from dr_stream.dev.clusters import LocalCluster
from dr_stream.kafka import admin, clients
from dr_stream.runtime.paths import project_root

HERE = Path(__file__).resolve().parent
PORTS = (19692, 29692)
PER_TOPIC = 10
WARM_S = 90.0
VARIANTS = {"fixed": "1s", "widening": "30s"}  # streaming.max_trigger
_WIDENED = re.compile(r"trigger \S+ -> (\S+): ")


@dataclass
class Run:
    variant: str
    repeat: int
    cores_busy: float
    batches_per_min: float
    batch_s: float
    records_per_batch: float
    p50_ms: float
    p99_ms: float
    received: int
    sent: int
    trigger: str


def _topics(variant: str, repeat: int, partitions: int) -> list[str]:
    return [f"tr.{variant}.{repeat}.t{i:03d}" for i in range(max(1, partitions // PER_TOPIC))]


class Trickle:
    """`rate` records/s, round robin over every partition, each value its send time in ns; a
    consumer on the destination keeps (send time, latency) of every record it receives."""

    def __init__(self, source: LocalCluster, target: LocalCluster, topics: list[str], rate: int) -> None:
        self.source, self.target, self.topics, self.rate = source, target, topics, rate
        self.stop = threading.Event()
        self.sent = 0
        self.received: list[tuple[float, float]] = []  # (sent at, latency ms)

    def produce(self) -> None:
        producer = clients.producer(ClusterConfig(self.source.alias, self.source.bootstrap), {"linger.ms": 5})
        where = [(t, p) for t in self.topics for p in range(PER_TOPIC)]
        per_tick, began = max(1, self.rate // 100), time.monotonic()
        try:
            while not self.stop.is_set():
                pause = began + (self.sent // per_tick) * 0.01 - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                for _ in range(per_tick):
                    topic, partition = where[self.sent % len(where)]
                    producer.produce(topic, struct.pack(">q", time.time_ns()) + b"x" * 120, partition=partition)
                    self.sent += 1
                producer.poll(0)
        finally:
            producer.flush(30)

    def consume(self) -> None:
        for topic in self.topics:
            wait_topic(self.target.bootstrap, topic, PER_TOPIC)
        consumer = clients.consumer(ClusterConfig(self.target.alias, self.target.bootstrap), "bench-trickle",
                                    {"enable.auto.commit": False, "fetch.wait.max.ms": 5})
        consumer.assign([TopicPartition(t, p, 0) for t in self.topics for p in range(PER_TOPIC)])
        try:
            while not self.stop.is_set():
                msg = consumer.poll(0.1)
                if msg is not None and msg.error() is None:
                    sent_ns = struct.unpack(">q", (msg.value() or b"")[:8])[0]
                    self.received.append((sent_ns / 1e9, (time.time_ns() - sent_ns) / 1e6))
        finally:
            consumer.close()


def measure(variant: str, repeat: int, partitions: int, rate: int, seconds: float, source: LocalCluster,
            target: LocalCluster, work: Path, logs: Path, log: Callable[[str], None]) -> Run:
    topics = _topics(variant, repeat, partitions)
    create_topics(source.bootstrap, {t: PER_TOPIC for t in topics})
    log_file = logs / f"trickle-{variant}-{repeat}.log"
    env = {**flow_env(work, source, target, rf"tr\.{variant}\.{repeat}\..*"), "BENCH_MAX_TRIGGER": VARIANTS[variant]}
    flow, trickle, flow_log = dr_stream(HERE / "flow.yaml", env, log_file), Trickle(source, target, topics, rate), \
        FlowLog(log_file)
    flow.start()
    workers = [Background("trickle producer", trickle.produce).start(),
               Background("trickle consumer", trickle.consume).start()]
    try:
        time.sleep(WARM_S)
        flow.check_alive()
        flow_log.batches()  # the warm-up's batches are not measured
        flow.cost.sample()
        began, cpu_before, sent_before = time.time(), flow.cost.cpu_seconds, trickle.sent
        for second in range(int(seconds)):
            time.sleep(1)
            if second % 30 == 29:
                flow.check_alive()
                log(f"  {variant}: {second + 1} of {seconds:.0f} s, {trickle.sent:,} sent, "
                    f"{len(trickle.received):,} received")
        flow.cost.sample()
        ended, cpu, sent = time.time(), flow.cost.cpu_seconds - cpu_before, trickle.sent - sent_before
        batches = [b for b in flow_log.batches() if b[1]]
        time.sleep(10)  # the window's last records reach the destination
        latencies = [ms for at, ms in list(trickle.received) if began <= at < ended]
    finally:
        trickle.stop.set()
        for worker in workers:
            worker.join(30)
        flow.stop()
        for cluster in (source, target):
            admin.delete_topics(clients.admin(ClusterConfig(cluster.alias, cluster.bootstrap)), topics)
        shutil.rmtree(work, ignore_errors=True)
    widened = _WIDENED.findall(log_file.read_text(errors="replace"))
    run = Run(variant, repeat, cpu / (ended - began), 60 * len(batches) / (ended - began),
              statistics.median(b[2] for b in batches) / 1000 if batches else float("nan"),
              statistics.median(b[1] for b in batches) if batches else 0.0,
              percentile(latencies, 50), percentile(latencies, 99), len(latencies), sent,
              widened[-1] if widened else "1s")
    log(f"  {variant}: {run.cores_busy:.2f} cores busy, {run.batches_per_min:.0f} batches/min of "
        f"{run.batch_s:.2f} s and {run.records_per_batch:.0f} records, latency p50 {run.p50_ms:.0f} ms, "
        f"p99 {run.p99_ms:.0f} ms, trigger {run.trigger}")
    return run


def summary(runs: list[Run]) -> list[dict[str, Any]]:
    rows = []
    for variant in VARIANTS:
        of = [r for r in runs if r.variant == variant]
        if of:
            rows.append({"variant": variant, "runs": len(of), "triggers": sorted({r.trigger for r in of}),
                         **{k: statistics.median(getattr(r, k) for r in of)
                            for k in ("cores_busy", "batches_per_min", "batch_s", "records_per_batch", "p50_ms",
                                      "p99_ms")}})
    return rows


def markdown(rows: list[dict[str, Any]], runs: list[Run], args: argparse.Namespace, when: str, png: str) -> str:
    lines = [
        f"# A trickle over {args.partitions} partitions: the trigger fixed and widening ({when})",
        "",
        f"`make bench-trickle`: bench/flow.yaml in micro-batch mode, trigger 1 s, `local[2]`, driver 2g, both "
        f"single-broker clusters on this machine (2 cores); {args.rate} records/s of 128 B spread evenly over "
        f"{args.partitions} partitions, measured for {args.seconds:.0f} s after a {WARM_S:.0f} s warm-up. "
        "fixed: `streaming.max_trigger: 1s`; widening: the default (30s). Medians over the runs.",
        "",
        "| trigger | runs | ended on | cores busy | batches/min | batch s | records/batch | latency p50 ms "
        "| latency p99 ms |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['variant']} | {r['runs']} | {', '.join(r['triggers'])} | {r['cores_busy']:.2f} "
                     f"| {r['batches_per_min']:.0f} | {r['batch_s']:.2f} | {r['records_per_batch']:.0f} "
                     f"| {r['p50_ms']:.0f} | {r['p99_ms']:.0f} |")
    lines += ["", "Each run:", ""]
    for run in runs:
        lines.append(f"- run {run.repeat + 1}, {run.variant}: {run.cores_busy:.2f} cores, {run.batches_per_min:.0f} "
                     f"batches/min of {run.batch_s:.2f} s, p50 {run.p50_ms:.0f} ms, p99 {run.p99_ms:.0f} ms, "
                     f"{run.received:,} of {run.sent:,} records timed, trigger {run.trigger}")
    lines += ["", f"![trickle]({png})", ""]
    return "\n".join(lines)


def plot(runs: list[Run], png: Path) -> None:
    with figure(png) as ax:
        for n, variant in enumerate(VARIANTS):
            of = [r for r in runs if r.variant == variant]
            ax.plot([r.cores_busy for r in of], [r.p50_ms / 1000 for r in of], "os"[n], color=f"C{n}",
                    label=f"{variant}: p50")
            ax.plot([r.cores_busy for r in of], [r.p99_ms / 1000 for r in of], "os"[n], color=f"C{n}", mfc="none",
                    label=f"{variant}: p99 (hollow)")
        ax.set_xlabel("cores busy (flow's CPU-seconds per second)")
        ax.set_ylabel("end-to-end latency, s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.trickle", description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=300)
    parser.add_argument("--rate", type=int, default=600)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=project_root() / "bench" / "results" / "trickle")
    args = parser.parse_args(argv)
    began, when = time.monotonic(), stamp()
    runs: list[Run] = []
    with bench_clusters("trickle", when, PORTS) as (source, target, work, logs):
        for r in range(args.repeat):
            for variant in VARIANTS if r % 2 == 0 else list(reversed(VARIANTS)):
                print(f"-- run {r + 1} of {args.repeat}: trigger {variant}", flush=True)
                runs.append(measure(variant, r, args.partitions, args.rate, args.seconds, source, target,
                                    work / f"flow-{variant}-{r}", logs, lambda line: print(line, flush=True)))
    report = write_results(args.out, when, partial(markdown, summary(runs), runs, args,
                                                   time.strftime("%Y-%m-%d %H:%M UTC")),
                           [asdict(r) for r in runs], partial(plot, runs))
    print(report.read_text())
    print(f"bench took {(time.monotonic() - began) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
