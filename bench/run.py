"""`make bench`: dr-stream against MirrorMaker 2 on the same two clusters, in one run.

    python -m bench.run [--smoke] [--out bench/results]

Starts its own local clusters (nothing else is touched), loads the source, then runs each
replicator (dr-stream in micro-batch and in real-time mode, MirrorMaker 2) alone through the
same workloads (bench/workloads.py), `BENCH_REPEAT` times (default 3) in alternation, each run
against a new destination cluster, measuring its process tree (bench/replicators.py). The
catch-up topic then grows to `long_records` (5M) and each replicator copies it once (the long
catch-up, where each JVM's warm-up is amortized); the failover timing is a dr-stream run of its
own at the end. Writes `<UTC time>.md` and `.png` under `--out`, copies
them to `latest.md` / `latest.png`, and stops everything it started, by PID.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import workloads
from bench.cpu_profile import JFR_OPTIONS, Profiler
from bench.failover_time import FailoverTimes, failover_times, index_bytes_per_million
from bench.replicators import Replicator, dr_stream, mirror_maker, plain_spark
from bench.report import DR, DR_RT, MM2, PLAIN, TOOLS, Runs, ToolResult, markdown, plot
from bench.workloads import Size
from dr_stream.background import Background
from dr_stream.dev.clusters import LocalCluster
from dr_stream.runtime.jvm import JvmPins
from dr_stream.runtime.paths import cache_dir, project_root

HERE = Path(__file__).resolve().parent
DR_TRIGGER = {DR: "200ms", DR_RT: "5m", PLAIN: "200ms"}
DR_DRIVER_MEMORY = "1g"
DR_TOPICS = r"bench\.catchup|bench\.drs\..*"
Log = Callable[[str], None]


def _machine() -> str:
    pins = JvmPins.load()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    # MirrorMaker 2 runs from the brokers' own jars, so it is the brokers' version; Spark's Kafka
    # connector runs the client version pinned for it.
    return (f"{os.cpu_count()} cores, {memory:.0f} GiB; brokers and MirrorMaker 2: Kafka {pins.kafka_broker}; "
            f"Spark {pins.spark} with kafka-clients {pins.kafka}; Java {_java_version()}")


def _java_version() -> str:
    out = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    found = re.search(r'version "([^"]+)"', out)
    return found.group(1) if found else "unknown"


def _host_steal_s() -> float:
    """CPU-seconds the hypervisor gave other guests instead of this machine, since boot. A run
    during which it grew ran slow for reasons outside it; the run's line says so."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK") if len(fields) > 8 else 0.0


def _mm2_properties(work: Path, source: str, target: str, topics: list[str]) -> Path:
    # Java properties read '\' as an escape: a regex backslash is written twice.
    text = (HERE / "mm2.properties").read_text()
    text = text.replace("${SOURCE}", source).replace("${TARGET}", target)
    text = text.replace("${TOPICS}", ", ".join(t.replace("\\", "\\\\") for t in topics))
    path = work / "mm2.properties"
    path.write_text(text)
    return path


def _run_tool(replicator: Replicator, result: ToolResult, source: LocalCluster, target: LocalCluster,
              names: dict[str, str], size: Size, megabytes: float, log: Log,
              profiler: Profiler | None = None, translates: bool = True, catch_up_only: bool = False,
              cpus: frozenset[int] | None = None) -> ToolResult:
    """`cpus`: the only CPUs the replicator's processes may run on (the constrained arm). With a
    `profiler`, each phase (start-up, catch-up, the wait for the lag topic, steady) is marked as it
    begins, and the recording written out before the replicator stops. A replicator that does not
    `translate` group offsets (the plain Spark copy) copies the failover topic but has no groups
    to measure. `catch_up_only`: stops once the catch-up is copied (the long
    catch-up)."""
    mark = profiler.mark if profiler else (lambda _: None)
    workloads.recreate_topic(source.bootstrap, names["steady"], size.partitions)
    log(f"== {result.name}: starting ({' '.join(replicator.command[:3])} ...)")
    steal_at = _host_steal_s()
    replicator.cpus = cpus
    replicator.start()
    if profiler:
        profiler.started(replicator)
    mark("start-up")
    cpu_at: dict[str, float] = {}

    def cpu_mark(phase: str) -> None:
        replicator.cost.sample()
        cpu_at[phase] = replicator.cost.cpu_seconds
        mark(phase)

    try:
        result.catch_up = workloads.wait_copied(target.bootstrap, names["catchup"], size.records, size.partitions,
                                                replicator.started_at, megabytes, replicator.check_alive, log,
                                                on_first=lambda: cpu_mark("catch-up"))
        cpu_mark("between")
        result.catch_up_cpu_seconds = cpu_at["between"] - cpu_at.get("catch-up", cpu_at["between"])
        log(f"  catch-up: {result.catch_up.seconds_from_start:.1f}s from start, "
            f"{result.catch_up.records_per_s:,.0f} records/s while copying, "
            f"{result.catch_up_cpu_seconds:,.1f} CPU-seconds")
        if catch_up_only:
            return result
        workloads.wait_topic(target.bootstrap, names["lag_dest"], 1)
        lag_dest = names["lag_dest"]
        # Everything copied before the groups commit, so each is translated against a complete copy.
        workloads.wait_copied(target.bootstrap, lag_dest, size.lag_records, 1, time.monotonic(), 0.0,
                              replicator.check_alive, log, timeout_s=300)
        workloads.wait_topic(target.bootstrap, names["steady_dest"], size.partitions)
        # The groups commit a few seconds into the steady load: their offsets travel while it runs.
        failover = Background("failover exactness", lambda: result.groups.extend(workloads.failover_exactness(
            source.bootstrap, names["lag"], target.bootstrap, lag_dest, size, names["tool"], log,
            delay_s=min(10, size.steady_seconds / 4)))).start() if translates else None
        cpu_mark("steady")
        result.latencies = workloads.steady(source.bootstrap, names["steady"], target.bootstrap,
                                            names["steady_dest"], size, log)
        cpu_mark("after")
        result.steady_cpu_seconds = cpu_at["after"] - cpu_at["steady"]
        result.sent = size.steady_rate * size.steady_seconds
        if failover is not None:
            failover.join(timeout=size.sync_wait_s + 120)
        log("  steady latency: " + ", ".join(f"p{q} {workloads.percentile(result.latencies, q):,.0f} ms"
                                             for q in (50, 95, 99)))
        replicator.check_alive()
    finally:
        if profiler:
            profiler.stopping()
        replicator.stop()
        result.peak_rss, result.cpu_seconds = replicator.cost.peak_rss, replicator.cost.cpu_seconds
        log(f"  {result.name} stopped: peak RSS {result.peak_rss / 2**20:,.0f} MiB, "
            f"{result.cpu_seconds:,.0f} CPU-seconds; the host took {_host_steal_s() - steal_at:,.1f} CPU-seconds "
            "away meanwhile (steal)")
    return result


def _dr_env(work: Path, source: LocalCluster, target: LocalCluster, tool: str, slots: int,
            jfr: bool = False) -> dict[str, str]:
    # JAVA_TOOL_OPTIONS reaches the Spark JVM that the driver starts (and Spark's launcher, which
    # records nothing before it exits).
    recording = {"JAVA_TOOL_OPTIONS": JFR_OPTIONS} if jfr else {}
    return {**recording, "BENCH_SOURCE": source.bootstrap, "BENCH_TARGET": target.bootstrap, "BENCH_WORK": str(work),
            "BENCH_TOPICS": DR_TOPICS, "BENCH_TRIGGER": trigger(tool), "BENCH_MAX_TRIGGER": "30s",
            "BENCH_MODE": "realtime" if tool == DR_RT else "microbatch",
            "DR_STREAM_MASTER": f"local[{slots}]", "DR_STREAM_DRIVER_MEMORY": DR_DRIVER_MEMORY}


def trigger(tool: str) -> str:
    """The tool's trigger; `BENCH_TRIGGER` in the environment sets the micro-batch one (an arm of
    `bench.ab`, say), which the tool's own environment would otherwise override."""
    return os.environ.get("BENCH_TRIGGER", DR_TRIGGER[tool]) if tool != DR_RT else DR_TRIGGER[tool]


def _cores(cpus: frozenset[int] | None) -> str:
    # Every replicator runs alone, on the whole machine or on the same cores of it, so each gets the same CPU.
    if cpus is None:
        return f"all {os.cpu_count()} cores"
    return f"{len(cpus)} of the {os.cpu_count()} cores (CPU {', '.join(map(str, sorted(cpus)))})"


def _slots(tool: str, size: Size) -> int:
    # Real-time mode: one slot per source partition (catch-up, steady, lag topics) plus one.
    return 2 * size.partitions + 2 if tool == DR_RT else 2


def _dr_stream(tool: str, work: Path, log_file: Path, source: LocalCluster, target: LocalCluster, size: Size,
               megabytes: float, log: Log, profiler: Profiler | None = None, catch_up_only: bool = False,
               cpus: frozenset[int] | None = None) -> ToolResult:
    slots = _slots(tool, size)
    env = _dr_env(work, source, target, tool, slots, jfr=profiler is not None)
    settings = (f"bench/flow.yaml: mode {env['BENCH_MODE']}, trigger {trigger(tool)}"
                + (", max_records_per_batch 500000" if tool == DR else "")
                + f"; {_cores(cpus)}, local[{slots}] task slots"
                + (" (real-time mode holds one per source partition)" if tool == DR_RT else "")
                + f", driver {DR_DRIVER_MEMORY}; sink acks=all, idempotent, linger 5 ms, batch 256 KiB")
    names = {"catchup": "bench.catchup", "steady": "bench.drs.steady", "steady_dest": "bench.drs.steady",
             "lag": "bench.drs.lag", "lag_dest": "bench.drs.lag", "tool": "drs"}
    result = _run_tool(dr_stream(HERE / "flow.yaml", env, log_file), ToolResult(tool, settings=settings),
                       source, target, names, size, megabytes, log, profiler, catch_up_only=catch_up_only, cpus=cpus)
    if not catch_up_only:
        result.index_bytes_per_million = index_bytes_per_million(work, log)
    return result


def _mirror_maker(tool: str, work: Path, log_file: Path, source: LocalCluster, target: LocalCluster, size: Size,
                  megabytes: float, log: Log, profiler: Profiler | None = None, catch_up_only: bool = False,
                  compat: bool = False, cpus: frozenset[int] | None = None) -> ToolResult:
    """MirrorMaker 2 at the brokers' version; `compat`: at the compatibility brokers' 3.x version."""
    work.mkdir(parents=True, exist_ok=True)
    properties = _mm2_properties(work, source.bootstrap, target.bootstrap, [r"bench\.catchup", r"bench\.mm2\..*"])
    pins = JvmPins.load()
    version = pins.kafka_broker_compat if compat else pins.kafka_broker
    settings = (f"Kafka {version}; bench/mm2.properties: dedicated mode, {_cores(cpus)}, tasks.max=2, heap 2G; "
                "group offset sync, checkpoints and heartbeats every 1 s, dst.offset.flush.interval.ms=1000, "
                "offset.lag.max at its default (100); "
                "source consumer fetch.max.wait.ms=50; producer acks=all, idempotent, linger 5 ms, batch 256 KiB")
    names = {"catchup": "src.bench.catchup", "steady": "bench.mm2.steady", "steady_dest": "src.bench.mm2.steady",
             "lag": "bench.mm2.lag", "lag_dest": "src.bench.mm2.lag", "tool": "mm2"}
    jvm_options = JFR_OPTIONS.split() if profiler else []
    return _run_tool(mirror_maker(properties, log_file, jvm_options=jvm_options, compat=compat),
                     ToolResult(tool, settings=settings), source, target, names, size, megabytes, log, profiler,
                     catch_up_only=catch_up_only, cpus=cpus)


def _plain_spark(tool: str, work: Path, log_file: Path, source: LocalCluster, target: LocalCluster, size: Size,
                 megabytes: float, log: Log, profiler: Profiler | None = None,
                 catch_up_only: bool = False, cpus: frozenset[int] | None = None) -> ToolResult:
    env = {**_dr_env(work, source, target, tool, 2, jfr=profiler is not None),
           "BENCH_TOPICS": r"bench\.catchup|bench\.plain\..*", "BENCH_WORK": str(work)}
    settings = (f"bench/plain_spark.py: Spark's Kafka source -> Spark's Kafka sink, nothing else; trigger "
                f"{trigger(tool)}, maxOffsetsPerTrigger 500000; {_cores(cpus)}, local[2], driver {DR_DRIVER_MEMORY}, "
                "dr-stream's JVM options, one task per core, asynchronous progress tracking; sink acks=all, "
                "idempotent, linger 5 ms, batch 256 KiB; no timestamp "
                "carried, no provenance, no offset index, no translation")
    names = {"catchup": "bench.catchup", "steady": "bench.plain.steady", "steady_dest": "bench.plain.steady",
             "lag": "bench.plain.lag", "lag_dest": "bench.plain.lag", "tool": "plain"}
    # Spark's sink creates no topic: the destination gets the source's partitions first.
    workloads.create_topics(target.bootstrap, {"bench.catchup": size.partitions,
                                               "bench.plain.steady": size.partitions, "bench.plain.lag": 1})
    return _run_tool(plain_spark(env, log_file), ToolResult(tool, settings=settings), source, target, names, size,
                     megabytes, log, profiler, translates=False, catch_up_only=catch_up_only, cpus=cpus)


# Not in `make bench`: `make profile` runs it to see what MirrorMaker 2 at the brokers' version
# does cheaper than the 3.x one on the same clusters.
MM2_COMPAT = "MirrorMaker 2 3.x"
RUNNERS: dict[str, Callable[..., ToolResult]] = {
    DR: _dr_stream, DR_RT: _dr_stream, PLAIN: _plain_spark, MM2: _mirror_maker,
    MM2_COMPAT: functools.partial(_mirror_maker, compat=True)}


def _order(repeat: int, tools: list[str]) -> list[str]:
    """Each repeat starts with a different replicator, so none is always first on a fresh machine."""
    shift = repeat % len(tools)
    return tools[shift:] + tools[:shift]


def fresh_target(work: Path, port: int, name: str) -> LocalCluster:
    # A new destination per run: no replicator finds another's topics, groups or internal state.
    target = LocalCluster("bench-dst", port, work / name)
    target.start()
    return target


def _failover_timing(work: Path, source: LocalCluster, port: int, size: Size, logs: Path, stamp: str,
                     log: Log) -> FailoverTimes | None:
    """A dr-stream run of its own, outside the measured ones: 1,000 groups would weigh on them."""
    target = fresh_target(work, port, "dst-failover")
    flow_work = work / "dr-stream-failover"
    env = {**_dr_env(flow_work, source, target, DR, 2), "BENCH_TOPICS": r"bench\.drs\.groups"}
    replicator = dr_stream(HERE / "flow.yaml", env, logs / f"{stamp}-dr-stream-failover.log")
    log("== dr-stream: failover timing")
    replicator.start()
    try:
        return failover_times(source.bootstrap, target.bootstrap, HERE / "flow.yaml", env, flow_work, log,
                              groups=size.failover_groups)
    finally:
        replicator.stop()
        target.stop()


def _long_catch_up(work: Path, source: LocalCluster, port: int, size: Size, logs: Path, stamp: str,
                   log: Log) -> dict[str, ToolResult]:
    """Grows the catch-up topic to `size.long_records` and lets each replicator copy it once,
    from a new destination, stopping once it has."""
    if size.long_records <= size.records:
        return {}
    added = size.long_records - size.records
    log(f"long catch-up: adding {added:,} records to bench.catchup ({size.long_records:,} in all) ...")
    workloads.load(source.bootstrap, "bench.catchup", added, size.record_bytes, size.partitions, log)
    long = dataclasses.replace(size, records=size.long_records)
    megabytes = long.records * long.record_bytes / 1e6
    out = {}
    for tool in [t for t in TOOLS if not size.long_tools or t in size.long_tools]:
        log(f"-- long catch-up: {tool}")
        slug = tool.replace(" ", "-")
        target = fresh_target(work, port, f"dst-long-{slug}")
        try:
            out[tool] = RUNNERS[tool](tool, work / f"{slug}-long", logs / f"{stamp}-{slug}-long.log", source, target,
                                      long, megabytes, log, catch_up_only=True)
        finally:
            target.stop()
            shutil.rmtree(work / f"dst-long-{slug}", ignore_errors=True)
    return out


def start_source(source: LocalCluster, size: Size, log: Log) -> float:
    """Starts the source cluster and loads every workload's topics; returns the catch-up's MB."""
    log(f"{source.alias}: starting on {source.bootstrap}")
    source.start()
    workloads.create_topics(source.bootstrap, {
        "bench.catchup": size.partitions, "bench.drs.steady": size.partitions,
        "bench.mm2.steady": size.partitions, "bench.plain.steady": size.partitions,
        "bench.drs.lag": 1, "bench.mm2.lag": 1, "bench.plain.lag": 1,
    })
    log(f"loading {size.records:,} records of {size.record_bytes} B into bench.catchup ...")
    megabytes = workloads.load(source.bootstrap, "bench.catchup", size.records, size.record_bytes,
                               size.partitions, log)
    for topic in ("bench.drs.lag", "bench.mm2.lag", "bench.plain.lag"):
        workloads.load(source.bootstrap, topic, size.lag_records, 100, 1, log)
    return megabytes


@dataclass(frozen=True)
class Arm:
    """How much of the machine every replicator of a round gets: the same for each, in turn."""

    name: str
    cpus: frozenset[int] | None  # None: the whole machine

    @property
    def slug(self) -> str:
        return "" if self.cpus is None else f"{self.name}-"


NORMAL = Arm("normal", None)
# One core of the machine's, the last (the first takes the most interrupts): the machine is busy
# with something else and the replicator gets what is left. The brokers and the load keep every core.
CONSTRAINED = Arm("constrained", frozenset({(os.cpu_count() or 1) - 1}))
ARMS = {arm.name: arm for arm in (NORMAL, CONSTRAINED)}


def _rounds(arm: Arm, tools: list[str], repeat: int, work: Path, logs: Path, stamp: str, source: LocalCluster,
            port: int, size: Size, megabytes: float, log: Log) -> Runs:
    """Each replicator `repeat` times in alternation, each run alone against a new destination."""
    runs: Runs = {tool: [] for tool in tools}
    for r in range(repeat):
        for tool in _order(r, tools):
            log(f"-- {arm.name} arm, run {r + 1} of {repeat}: {tool} on {_cores(arm.cpus)}")
            slug = arm.slug + tool.replace(" ", "-")
            target = fresh_target(work, port, f"dst-{r}-{slug}")
            try:
                runs[tool].append(RUNNERS[tool](tool, work / f"{slug}-{r}", logs / f"{stamp}-{slug}-{r}.log",
                                                source, target, size, megabytes, log, cpus=arm.cpus))
            finally:
                target.stop()
                shutil.rmtree(work / f"dst-{r}-{slug}", ignore_errors=True)
    return runs


def run(size: Size, out: Path, ports: tuple[int, int] = (19392, 29392), log: Log = print,
        only: str | None = None, repeat: int | None = None,
        arms: tuple[Arm, ...] = (NORMAL, CONSTRAINED)) -> Path | None:
    """The rounds of each arm, then (with the normal arm) the long catch-up and the failover timing."""
    repeat = repeat or int(os.environ.get("BENCH_REPEAT", "3"))
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    work = cache_dir() / "bench" / f"run-{stamp}"
    logs = cache_dir() / "bench" / "logs"  # kept after the run, unlike `work`
    source = LocalCluster("bench-src", ports[0], work / "src")
    tools = [only] if only else [t for t in TOOLS if not size.tools or t in size.tools]
    constrained_tools = [only] if only else [t for t in tools
                                             if not size.constrained_tools or t in size.constrained_tools]
    try:
        megabytes = start_source(source, size, log)
        by_arm = {arm.name: _rounds(arm, constrained_tools if arm is CONSTRAINED else tools, repeat, work, logs,
                                    stamp, source, ports[1], size, megabytes, log) for arm in arms}
        if only or NORMAL.name not in by_arm:
            return None
        runs = by_arm[NORMAL.name]
        # Before the failover timing, whose topic of 10 partitions a real-time flow would need slots for.
        long = _long_catch_up(work, source, ports[1], size, logs, stamp, log)
        runs[DR][0].failover = _failover_timing(work, source, ports[1], size, logs, stamp, log)
        out.mkdir(parents=True, exist_ok=True)
        png = out / f"{stamp}.png"
        constrained = by_arm.get(CONSTRAINED.name)
        plot(runs, png, constrained)
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        report = out / f"{stamp}.md"
        report.write_text(markdown(runs, size, when, _machine(), png.name, long, constrained,
                                   _cores(CONSTRAINED.cpus)))
        shutil.copyfile(png, out / "latest.png")
        (out / "latest.md").write_text(re.sub(re.escape(png.name), "latest.png", report.read_text()))
        log(f"results: {report} and {png} (also latest.md / latest.png)")
        return report
    finally:
        if source.stop():
            log(f"{source.alias}: stopped")
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the harness, measures nothing")
    parser.add_argument("--out", type=Path, default=project_root() / "bench" / "results")
    parser.add_argument("--only", choices=list(TOOLS), help="tuning: run one replicator, print its numbers, "
                                                            "write no results")
    parser.add_argument("--arms", default=",".join(ARMS), help="the arms to run, of: " + ", ".join(ARMS)
                        + " (results are written only with the normal arm)")
    args = parser.parse_args(argv)
    unknown = [a for a in args.arms.split(",") if a not in ARMS]
    if unknown:
        parser.error(f"--arms: no arm {', '.join(unknown)}; the arms are {', '.join(ARMS)}")
    began = time.monotonic()
    report = run(workloads.SMOKE if args.smoke else workloads.FULL, args.out,
                 log=lambda line: print(line, flush=True), only=args.only,
                 arms=tuple(ARMS[a] for a in args.arms.split(",")))
    if report is None:
        return 0
    print(report.read_text())
    print(f"bench took {(time.monotonic() - began) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
