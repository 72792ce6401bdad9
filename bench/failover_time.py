"""dr-stream only: failover wall time with the source gone, and the offset index's size.

MirrorMaker 2 has no failover command (its groups are moved by its checkpoint task, or by an
application calling `RemoteClusterUtils.translateOffsets`), so these rows have no peer figure.

`groups` consumer groups commit on every partition of a `partitions`-partition topic; once the
flow has recorded all their positions, `dr-stream failover` runs with the source's address
pointing nowhere (the datacenter is gone), for one group and for all of them, and its wall time
is taken from the outside, process start to exit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import TopicPartition

from bench.workloads import Log, bench_cluster, create_topics, load, wait_copied
from dr_stream.index.run_store import RunStore
from dr_stream.kafka import clients
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.runtime.paths import project_root


@dataclass(frozen=True)
class FailoverTimes:
    one_group_s: float | None
    all_groups_s: float | None
    groups: int
    partitions: int


def _commit_all(bootstrap: str, groups: list[str], topic: str, partitions: int, offset: int) -> None:
    for group in groups:
        consumer = clients.consumer(bench_cluster(bootstrap), group)
        try:
            consumer.commit(offsets=[TopicPartition(topic, p, offset) for p in range(partitions)], asynchronous=False)
        finally:
            consumer.close()


def _timed_failover(config: Path, env: dict[str, str], group: str, log: Log) -> float | None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "dr_stream.cli", "failover", "--config", str(config),
                           "--group", group, "--json"], env={**os.environ, **env}, capture_output=True, text=True,
                          cwd=project_root(), timeout=600)
    wall = time.monotonic() - started
    if done.returncode != 0:
        log(f"  failover --group {group} exited {done.returncode}: {done.stderr.strip()[-500:]}")
        return None
    return wall


def _index_bytes(path: str) -> int:
    from deltalake import DeltaTable

    actions = DeltaTable(path).get_add_actions(flatten=True)
    return sum(actions.column("size_bytes").to_pylist())


def failover_times(source: str, destination: str, config: Path, env: dict[str, str], work: Path, log: Log,
                   groups: int = 1000, partitions: int = 10, timeout_s: float = 600) -> FailoverTimes:
    topic = "bench.drs.groups"
    create_topics(source, {topic: partitions})
    load(source, topic, 100 * partitions, 100, partitions, log)
    wait_copied(destination, topic, 100 * partitions, partitions, time.monotonic(), 0.0, lambda: None, log)
    names = [f"bench-fo-{i:04d}" for i in range(groups)]
    log(f"  failover timing: {groups} groups commit on {partitions} partitions each ...")
    _commit_all(source, names, topic, partitions, 50)
    deadline = time.monotonic() + timeout_s
    wanted = groups * partitions
    recorded = 0
    while time.monotonic() < deadline:
        tables = FlowTables.at(str(work / "offset-index"), str(work / "translations"))  # a snapshot per look
        recorded = sum(1 for r in tables.translations.latest()
                       if r["group"].startswith("bench-fo-") and r["method"] == "exact")
        if recorded >= wanted:
            break
        time.sleep(2)
    log(f"  failover timing: {recorded} of {wanted} positions recorded by the flow")
    gone = {**env, "BENCH_SOURCE": "127.0.0.1:1"}
    one = _timed_failover(config, gone, names[0], log)
    every = _timed_failover(config, gone, "bench-fo-.*", log)
    shown = ["failed" if t is None else f"{t:.2f}s" for t in (one, every)]
    log(f"  failover with the source gone: 1 group {shown[0]}, {groups:,} groups x {partitions} partitions {shown[1]}")
    return FailoverTimes(one, every, groups, partitions)


def index_bytes_per_million(work: Path, log: Log) -> float | None:
    """The offset index's size per million records it covers, read once the flow has stopped
    (a stop appends its last runs)."""
    index = str(work / "offset-index")
    runs = FlowTables.at(index, str(work / "translations")).index.runs()
    copied = sum(r.records for r in RunStore(runs))  # rows may repeat versions of one growing run
    per_million = _index_bytes(index) / copied * 1e6 if copied else None
    log(f"  offset index: {per_million or 0:,.0f} bytes per million records ({len(runs)} rows for {copied:,} records)")
    return per_million
