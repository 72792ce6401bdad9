"""`make bench-batch`: what one micro-batch costs per source partition, at 10 to 1,000 partitions.

    python -m bench.batch_cost [--partitions 10,100,300,1000] [--repeat 2] [--out bench/results/batch]

One source and one destination cluster of its own. For each partition count, in topics of 10
partitions, the flow (bench/flow.yaml, micro-batch, `local[2]`) starts on a new checkpoint with
one record waiting on every partition, then stays idle, then gets a new record on every
partition (one transaction, so one batch sees them all) `WARM` times:

* cold batch: the first batch of a new process (a new JVM, no cached consumer);
* warm batch: a batch of the running flow (its consumers cached since the previous batch);
* each batch's wall time is Spark's own (`triggerExecution`, from the flow's progress line),
  its CPU-seconds are the process tree's (driver and Spark JVM) over the batch, less what the
  idle flow spends in that time (its control loops), measured just before;
* the process tree's peak RSS.

A batch that finds only part of a transaction's records is added to the next one (the row says
how many batches it took). Runs `--repeat` times; writes `<UTC time>.md`, `.json`, `.png` under
`--out` and `latest.*`; stops every process it started by its PID.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench.cpu_profile import JFR_OPTIONS, dump_flight_recording
from bench.replicators import Replicator, dr_stream
from bench.result_files import bench_clusters, figure, stamp, write_results
from bench.workloads import create_topics
from dr_stream.core.config import ClusterConfig
from dr_stream.dev.clusters import LocalCluster
from dr_stream.kafka import admin, clients
from dr_stream.runtime.paths import project_root

HERE = Path(__file__).resolve().parent
PORTS = (19592, 29592)
PER_TOPIC = 10
WARM = 3
IDLE_S = 10.0
Log = Callable[[str], None]
_BATCH = re.compile(r"batch (\d+): (\d+) read, .*?, (\d+) ms \((.*?)\)(?:;|$)")


@dataclass
class Batch:
    partitions: int
    kind: str  # "cold" or "warm"
    wall_s: float  # Spark's triggerExecution, summed over the batches that read the records
    cpu_s: float  # the process tree's CPU over the batch, less the idle flow's
    batches: int
    parts: str  # the batch's largest durations, as the progress line gives them

    @property
    def ms_per_partition(self) -> float:
        return 1000 * self.wall_s / self.partitions

    @property
    def cpu_ms_per_partition(self) -> float:
        return 1000 * self.cpu_s / self.partitions


@dataclass
class Run:
    partitions: int
    repeat: int
    batches: list[Batch] = field(default_factory=list)
    idle_cpu_per_s: float = 0.0
    peak_rss_mib: float = 0.0
    start_to_first_batch_s: float = 0.0


def _topics(partitions: int, repeat: int) -> list[str]:
    return [f"bc.{partitions}.{repeat}.t{i:03d}" for i in range(max(1, partitions // PER_TOPIC))]


def _per_topic(partitions: int) -> int:
    return min(partitions, PER_TOPIC)


def one_record_each(producer: Producer, topics: list[str], partitions: int, seq: int) -> None:
    """A record on every partition, in one transaction: the flow reads committed records only,
    so they become visible together and one batch reads them all."""
    producer.begin_transaction()
    for topic in topics:
        for p in range(partitions):
            producer.produce(topic, f"{seq:08d}".encode() * 16, key=str(p).encode(), partition=p)
    producer.commit_transaction(60)


class FlowLog:
    """The flow's progress lines, read as the file grows."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0

    def batches(self) -> list[tuple[int, int, int, str]]:
        """(batch id, records read, triggerExecution ms, largest parts) of the lines since the last call."""
        if not self.path.exists():
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        out = []
        for line in data[:end].decode(errors="replace").splitlines():
            m = _BATCH.search(line)
            if m:
                out.append((int(m[1]), int(m[2]), int(m[3]), m[4]))
        return out


def wait_batches(flow_log: FlowLog, records: int, replicator: Replicator, timeout_s: float = 300
                 ) -> tuple[float, int, str, float]:
    """Waits until the flow's batches have read `records`; (wall s, batches, parts, CPU-s at the end)."""
    read, wall_ms, count, parts = 0, 0, 0, ""
    deadline = time.monotonic() + timeout_s
    while read < records:
        replicator.check_alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{read} of {records} records read after {timeout_s:.0f} s; see {flow_log.path}")
        for _, n, ms, what in flow_log.batches():
            if n:
                read, wall_ms, count, parts = read + n, wall_ms + ms, count + 1, what
        time.sleep(0.05)
    replicator.cost.sample()
    return wall_ms / 1000, count, parts, replicator.cost.cpu_seconds


def flow_env(work: Path, source: LocalCluster, target: LocalCluster, pattern: str, jfr: bool = False
         ) -> dict[str, str]:
    # With `jfr`, the Spark JVM keeps a Java Flight Recording, written out by `dump_flight_recording`.
    recording = {"JAVA_TOOL_OPTIONS": JFR_OPTIONS} if jfr else {}
    return {**recording, "BENCH_SOURCE": source.bootstrap, "BENCH_TARGET": target.bootstrap, "BENCH_WORK": str(work),
            "BENCH_TOPICS": pattern, "BENCH_TRIGGER": "1s", "BENCH_MAX_TRIGGER": "30s", "BENCH_MODE": "microbatch",
            "DR_STREAM_MASTER": "local[2]", "DR_STREAM_DRIVER_MEMORY": "2g"}


def measure(partitions: int, repeat: int, source: LocalCluster, target: LocalCluster, work: Path, logs: Path,
            log: Log, jfr: bool = False) -> Run:
    topics, per_topic = _topics(partitions, repeat), _per_topic(partitions)
    create_topics(source.bootstrap, {t: per_topic for t in topics})
    producer = clients.producer(ClusterConfig(source.alias, source.bootstrap),
                                {"linger.ms": 5, "transactional.id": f"bench-batch-{partitions}-{repeat}"})
    producer.init_transactions(30)
    one_record_each(producer, topics, per_topic, 0)
    run = Run(partitions, repeat)
    log_file = logs / f"batch-{partitions}-{repeat}.log"
    flow_log = FlowLog(log_file)
    replicator = dr_stream(HERE / "flow.yaml", flow_env(work, source, target, rf"bc\.{partitions}\.{repeat}\..*", jfr),
                           log_file)
    replicator.start()
    try:
        wall, count, parts, _ = wait_batches(flow_log, partitions, replicator)
        run.start_to_first_batch_s = time.monotonic() - replicator.started_at
        run.batches.append(Batch(partitions, "cold", wall, 0.0, count, parts))
        log(f"  {partitions} partitions: cold batch {wall:.2f} s ({parts}), {run.start_to_first_batch_s:.0f} s "
            "after start")
        replicator.cost.sample()
        idle_from, idle_cpu = time.monotonic(), replicator.cost.cpu_seconds
        time.sleep(IDLE_S)
        replicator.cost.sample()
        run.idle_cpu_per_s = (replicator.cost.cpu_seconds - idle_cpu) / (time.monotonic() - idle_from)
        for seq in range(1, WARM + 1):
            replicator.cost.sample()
            began, cpu_before = time.monotonic(), replicator.cost.cpu_seconds
            one_record_each(producer, topics, per_topic, seq)
            wall, count, parts, cpu_after = wait_batches(flow_log, partitions, replicator)
            cpu = max(0.0, cpu_after - cpu_before - run.idle_cpu_per_s * (time.monotonic() - began))
            run.batches.append(Batch(partitions, "warm", wall, cpu, count, parts))
            log(f"  {partitions} partitions: warm batch {wall:.2f} s, {cpu:.2f} CPU-s ({parts})")
            time.sleep(2)
        run.peak_rss_mib = replicator.cost.peak_rss / 2**20
        if jfr:
            dump_flight_recording(replicator, logs / f"batch-{partitions}-{repeat}.jfr")
    finally:
        replicator.stop()
        producer.flush(10)
        for cluster in (source, target):
            admin.delete_topics(clients.admin(ClusterConfig(cluster.alias, cluster.bootstrap)), topics)
        shutil.rmtree(work, ignore_errors=True)
    return run


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summary(runs: list[Run]) -> list[dict[str, Any]]:
    """A row per partition count: medians over repeats (cold) and over every warm batch."""
    rows = []
    for n in sorted({r.partitions for r in runs}):
        of_n = [r for r in runs if r.partitions == n]
        cold = [b for r in of_n for b in r.batches if b.kind == "cold"]
        warm = [b for r in of_n for b in r.batches if b.kind == "warm"]
        rows.append({
            "partitions": n,
            "cold_s": _median([b.wall_s for b in cold]),
            "warm_s": _median([b.wall_s for b in warm]),
            "warm_cpu_s": _median([b.cpu_s for b in warm]),
            "cold_ms_per_partition": _median([b.ms_per_partition for b in cold]),
            "warm_ms_per_partition": _median([b.ms_per_partition for b in warm]),
            "warm_cpu_ms_per_partition": _median([b.cpu_ms_per_partition for b in warm]),
            "idle_cpu_per_s": _median([r.idle_cpu_per_s for r in of_n]),
            "peak_rss_mib": _median([r.peak_rss_mib for r in of_n]),
            "start_to_first_batch_s": _median([r.start_to_first_batch_s for r in of_n]),
            "runs": len(of_n),
            "warm_range_s": (min(b.wall_s for b in warm), max(b.wall_s for b in warm)) if warm else None,
        })
    return rows


def markdown(rows: list[dict[str, Any]], runs: list[Run], when: str, png: str) -> str:
    lines = [
        f"# Micro-batch cost per source partition ({when})",
        "",
        "`make bench-batch`: bench/flow.yaml in micro-batch mode, trigger 1 s, `local[2]`, driver 2g, both "
        "single-broker clusters on this machine (2 cores); one new 128 B record on every partition per batch. "
        "Wall: Spark's triggerExecution. CPU: the flow's process tree over the batch less its idle rate. "
        f"Medians: cold over {max(r['runs'] for r in rows)} runs, warm over {WARM} batches per run.",
        "",
        "| partitions | cold batch s | warm batch s (range) | cold ms/partition | warm ms/partition "
        "| warm CPU-ms/partition | idle CPU-s/s | peak RSS MiB | start -> first batch done s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        low, high = r["warm_range_s"] or (float("nan"), float("nan"))
        lines.append(f"| {r['partitions']:,} | {r['cold_s']:.2f} | {r['warm_s']:.2f} ({low:.2f}-{high:.2f}) "
                     f"| {r['cold_ms_per_partition']:.1f} | {r['warm_ms_per_partition']:.1f} "
                     f"| {r['warm_cpu_ms_per_partition']:.1f} | {r['idle_cpu_per_s']:.2f} | {r['peak_rss_mib']:,.0f} "
                     f"| {r['start_to_first_batch_s']:.0f} |")
    lines += ["", "Where the time of each batch went (the progress line's three largest parts):", ""]
    for run in runs:
        for b in run.batches:
            lines.append(f"- {run.partitions} partitions, run {run.repeat + 1}, {b.kind}: {b.wall_s:.2f} s "
                         f"in {b.batches} batch(es): {b.parts}")
    lines += ["", f"![batch cost]({png})", ""]
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], png: Path) -> None:
    with figure(png) as ax:
        n = [r["partitions"] for r in rows]
        ax.plot(n, [r["cold_s"] for r in rows], "o-", label="cold batch (new process)")
        ax.plot(n, [r["warm_s"] for r in rows], "s-", label="warm batch")
        ax.plot(n, [r["warm_cpu_s"] for r in rows], "^--", label="warm batch, CPU-seconds")
        ax.set_xscale("log")
        ax.set_xlabel("source partitions with a new record")
        ax.set_ylabel("seconds per batch")


def run(counts: list[int], repeat: int, out: Path, log: Log = print, jfr: bool = False) -> Path:
    when = stamp()
    runs: list[Run] = []
    with bench_clusters("batch", when, PORTS) as (source, target, work, logs):
        for r in range(repeat):
            # Alternating order: no partition count always runs on a machine fresh from the last.
            for n in counts if r % 2 == 0 else list(reversed(counts)):
                log(f"-- run {r + 1} of {repeat}: {n} partitions")
                runs.append(measure(n, r, source, target, work / f"flow-{n}-{r}", logs, log, jfr))
    rows = summary(runs)
    report = write_results(out, when, partial(markdown, rows, runs, time.strftime("%Y-%m-%d %H:%M UTC")),
                           {"rows": rows, "runs": [asdict(r) for r in runs]}, partial(plot, rows))
    log(f"results: {report}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.batch_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="10,100,300,1000")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", type=Path, default=project_root() / "bench" / "results" / "batch")
    parser.add_argument("--jfr", action="store_true", help="a Java Flight Recording of each flow, beside its log")
    args = parser.parse_args(argv)
    began = time.monotonic()
    report = run([int(n) for n in args.partitions.split(",")], args.repeat, args.out,
                 log=lambda line: print(line, flush=True), jfr=args.jfr)
    print(report.read_text())
    print(f"bench took {(time.monotonic() - began) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
