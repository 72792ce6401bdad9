"""`make demo`: active-active dc1 <-> dc2 on sample data, then a failover, printed as it happens.

Act 1: starts the local clusters (unless already up), writes sample records under the same
topic names in both, runs both flows in one Spark application, and prints per-topic counts
until both clusters hold every record once and the counts stay put (no loop).
Act 2: an ordinary consumer group (no dr-stream code in it) reads part of `demo.shipments`
in dc1 and commits; dc1 goes away; `failover` moves the group to dc2, where it resumes; the
demo counts the records it read twice or never (0 and 0).
Act 3: while dc1 is down, dc2 takes new shipments and the group reads on; dc1 returns with
its data and `failback` copies back only what dc2 received, reports the 2 records dc1 had
never replicated, and moves the group back, where it resumes with 0 re-read and 0 skipped.
Stops what it started.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic

from dr_stream.background import Background, BackgroundFailed
from dr_stream.core.config import ClusterConfig, FlowConfig, load_flow
from dr_stream.core.contracts import CONSUMER_TIMESTAMPS_TOPIC, PROVENANCE_HEADER, lag_topic, runs_topic
from dr_stream.core.provenance import newest_entry
from dr_stream.dev.clusters import DEV_PORTS, LocalCluster, dev_clusters
from dr_stream.kafka import clients, consumed
from dr_stream.kafka.admin import delete_topics
from dr_stream.kafka.group_offsets.consumer_groups import committed_offsets, delete_group
from dr_stream.operations.command_failure import report
from dr_stream.operations.failback import failback
from dr_stream.operations.failover import failover
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.operations.report import format_failback, format_positions
from dr_stream.replication.flow import build_flow
from dr_stream.replication.supervisor import running_in_background
from dr_stream.runtime.paths import cache_dir, project_root
from dr_stream.runtime.session import spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TOPICS = {"demo.orders": 3, "demo.payments": 2}
PER_TOPIC = 5000
SHIPMENTS, SHIPMENTS_PARTITIONS, SHIPMENTS_RECORDS, CONSUMED_PER_PARTITION = "demo.shipments", 3, 9000, 2000
GROUP = "demo-shipping"
LATE, OUTAGE_RECORDS, OUTAGE_CONSUMED = 2, 600, 50


# The flows' own topics from an earlier demo would tell the new flows that records of today's
# recreated topics were copied already.
FLOW_TOPICS = [topic(f) for f in ("dc1-to-dc2", "dc2-to-dc1") for topic in (runs_topic, lag_topic)]


def _fresh_topics(cluster: ClusterConfig, topics: dict[str, int]) -> None:
    admin = clients.admin(cluster)
    delete_group(admin, GROUP)
    delete_topics(admin, list(topics) + FLOW_TOPICS + [CONSUMER_TIMESTAMPS_TOPIC])
    created = admin.create_topics([NewTopic(t, n, -1) for t, n in topics.items()])  # the cluster's default
    for future in created.values():
        future.result(timeout=30)


def _produce(cluster: ClusterConfig) -> None:
    alias = cluster.alias
    with clients.producing(cluster, {"linger.ms": 20}) as producer:
        for topic in TOPICS:
            for i in range(PER_TOPIC):
                producer.produce(topic, key=f"{alias}-{i % 100}".encode(), value=f"{alias}:{topic}:{i}".encode(),
                                 headers=[("origin", alias.encode())])
                if i % 2000 == 0:
                    producer.poll(0)


def _counts(cluster: ClusterConfig) -> dict[str, int]:
    with clients.consuming(cluster, "dr-stream-demo-peek") as consumer:
        out = {}
        for topic, partitions in TOPICS.items():
            marks = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)]
            out[topic] = sum(high - low for low, high in marks)
        return out


def _start_flows(spark: SparkSession, flows: ExitStack, clusters: list[LocalCluster],
                 work: Path) -> tuple[dict[str, FlowConfig], list[Background]]:
    """Both directions in this Spark application, on `clusters`, with their state under `work`,
    each run in the background until `flows` closes."""
    shutil.rmtree(work, ignore_errors=True)
    at = {c.alias: c.bootstrap for c in clusters}
    configs: dict[str, FlowConfig] = {}
    threads = []
    for name in ("dc1-to-dc2", "dc2-to-dc1"):
        config = load_flow(project_root() / "conf" / f"{name}.yaml")
        configs[name] = config = replace(
            config,
            source=replace(config.source, bootstrap_servers=at[config.source.alias]),
            destination=replace(config.destination, bootstrap_servers=at[config.destination.alias]),
            streaming=replace(config.streaming, checkpoint_dir=str(work / name / "checkpoints"),
                              offset_index=str(work / name / "offset-index"),
                              translations=str(work / name / "translations")))
        threads.append(flows.enter_context(running_in_background(build_flow(config, spark))))
    return configs, threads


def _stop_flows(flows: ExitStack, said: bool = False) -> bool:
    """Stops the flows and waits for them; says on stderr a flow that failed (or did not stop),
    unless that was `said` already where it was found."""
    try:
        flows.close()
    except BackgroundFailed as exc:
        if not said:
            print(f"demo: {exc}", file=sys.stderr)
        return False
    return True


def _wait_converged(clusters: list[LocalCluster], flows: list[Background], timeout_s: float = 600.0) -> bool:
    """Prints counts until both clusters hold every record once, and the counts stay put for 10 s
    (raises when a flow has failed)."""
    expected = 2 * PER_TOPIC
    began, stable_since, last = time.monotonic(), None, None
    while time.monotonic() - began < timeout_s:
        time.sleep(2)
        for flow in flows:
            flow.check()
        now = {c.alias: _counts(c.config) for c in clusters}
        print("counts: " + "  ".join(f"{alias} {t}={n}" for alias, per in now.items() for t, n in per.items()),
              flush=True)
        done = all(n == expected for per in now.values() for n in per.values())
        if done and stable_since is None:
            stable_since = time.monotonic()
            elapsed = stable_since - began
            print(f"both clusters hold all {expected} records per topic after {elapsed:.1f}s "
                  f"({2 * PER_TOPIC * len(TOPICS) / elapsed:.0f} records/s replicated across both flows)")
        if done and now == last and stable_since is not None and time.monotonic() - stable_since >= 10:
            print("counts stable for 10s: every record exactly once in each cluster, nothing loops")
            return True
        if not done:
            stable_since = None
        last = now
    print(f"demo: counts did not converge within {timeout_s:.0f}s", file=sys.stderr)
    return False


def _restore(clusters: list[LocalCluster], started: list[LocalCluster]) -> None:
    """Leaves the clusters as the demo found them."""
    for cluster in clusters:
        if cluster in started:
            cluster.stop()
            print(f"{cluster.alias}: stopped")
        elif not cluster.is_running():  # the failover act took down a cluster that was up before
            cluster.start()
            print(f"{cluster.alias}: started again, as it was before the demo")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m dr_stream.dev.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--ports", default=",".join(str(p) for p in DEV_PORTS),
                        help="dc1's and dc2's broker ports (default: the dev clusters', %(default)s)")
    parser.add_argument("--home", type=Path, default=None,
                        help="where the clusters (when not the dev ones) and the flows' state live "
                             "(default: .cache/dev and .cache/demo)")
    args = parser.parse_args(argv)
    try:
        ports = tuple(int(p) for p in args.ports.split(","))
    except ValueError:
        ports = ()
    if len(ports) != 2:
        parser.error(f"--ports {args.ports}: two port numbers, dc1's and dc2's, separated by a comma")
    args.ports = ports
    return args


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    # Other ports or a home of its own keep the demo's clusters apart from `dr-stream dev up`'s.
    own = args.home or (None if args.ports == DEV_PORTS else cache_dir() / f"demo-{args.ports[0]}-{args.ports[1]}")
    clusters = dev_clusters(own / "clusters" if own else None, args.ports)
    work = own / "flows" if own else cache_dir() / "demo"
    started = [c for c in clusters if not c.is_running()]
    for cluster in clusters:
        print(f"{cluster.alias}: {'starting' if cluster in started else 'already running'} on {cluster.bootstrap}")
        cluster.start()
    spark = None
    flows, said = ExitStack(), False
    try:
        for cluster in clusters:
            _fresh_topics(cluster.config, {**TOPICS, SHIPMENTS: SHIPMENTS_PARTITIONS})
            _produce(cluster.config)
        print(f"produced {PER_TOPIC} records into each of {', '.join(TOPICS)} in both dc1 and dc2")
        spark = spark_session("dr-stream-demo")
        spark.sparkContext.setLogLevel("ERROR")
        configs, threads = _start_flows(spark, flows, clusters, work)
        if not _wait_converged(clusters, threads):
            return 1
        return _failover_act(spark, configs, clusters, flows, threads)
    except Exception as exc:  # one line, as a command says it; the traceback to a file
        print(report("demo", exc).line, file=sys.stderr)
        said = True
        return 1
    finally:
        _stop_flows(flows, said)
        if spark is not None:
            spark.stop()
        _restore(clusters, started)


def _consume_and_commit(cluster: ClusterConfig) -> dict[int, int]:
    """An ordinary application: reads CONSUMED_PER_PARTITION records of each partition, commits."""
    with clients.consuming(cluster, GROUP) as consumer:
        consumer.assign([TopicPartition(SHIPMENTS, p, 0) for p in range(SHIPMENTS_PARTITIONS)])
        read = dict.fromkeys(range(SHIPMENTS_PARTITIONS), 0)
        while any(n < CONSUMED_PER_PARTITION for n in read.values()):
            for msg in consumer.consume(num_messages=1000, timeout=clients.CONSUME_WAIT_S):
                if not msg.error() and consumed.offset(msg) < CONSUMED_PER_PARTITION:
                    read[consumed.topic_partition(msg)[1]] += 1
        offsets = dict.fromkeys(range(SHIPMENTS_PARTITIONS), CONSUMED_PER_PARTITION)
        consumer.commit(offsets=[TopicPartition(SHIPMENTS, p, o) for p, o in offsets.items()], asynchronous=False)
        return offsets


def _committed(cluster: ClusterConfig) -> dict[int, int]:
    found = committed_offsets(cluster, GROUP, [(SHIPMENTS, p) for p in range(SHIPMENTS_PARTITIONS)])
    return {p: c.offset for (t, p), c in found.items() if t == SHIPMENTS}


def _read_partitions(cluster: ClusterConfig, group: str, starts: dict[int, int],
                     per_partition: int | None = None) -> dict[int, list[Any]]:
    """Records of SHIPMENTS from `starts` to the end (or `per_partition` records each), per partition."""
    with clients.consuming(cluster, group, {"enable.partition.eof": True}) as consumer:
        consumer.assign([TopicPartition(SHIPMENTS, p, o) for p, o in starts.items()])
        read: dict[int, list[Any]] = {p: [] for p in starts}
        open_partitions = set(starts)
        while open_partitions:
            for msg in consumer.consume(num_messages=1000, timeout=clients.CONSUME_WAIT_S):
                where = consumed.place(msg)
                if where is None:
                    continue
                p = where[1]
                if msg.error() or (per_partition is not None and len(read[p]) >= per_partition):
                    open_partitions.discard(p)
                    continue
                read[p].append(msg)
        return read


def _read_as_group(cluster: ClusterConfig, per_partition: int | None = None, commit: bool = False) -> list[Any]:
    """The group reads from its committed offsets, to the end or `per_partition` records each
    (then commits there): (partition, value, headers) in the order read."""
    read = _read_partitions(cluster, GROUP, _committed(cluster), per_partition)
    if commit:
        with clients.consuming(cluster, GROUP) as consumer:
            consumer.commit(offsets=[TopicPartition(SHIPMENTS, p, msgs[-1].offset() + 1)
                                     for p, msgs in read.items() if msgs], asynchronous=False)
    return [(m.partition(), m.value().decode(), m.headers()) for msgs in read.values() for m in msgs]


def _shipments(cluster: ClusterConfig) -> set[str]:
    read = _read_partitions(cluster, "dr-stream-demo-peek", dict.fromkeys(range(SHIPMENTS_PARTITIONS), 0))
    found = [m.value().decode() for msgs in read.values() for m in msgs]
    assert len(found) == len(set(found)), "a shipment is in the topic twice"
    return set(found)


def _produce_shipments(cluster: ClusterConfig, values: list[str],
                       partition_of: Callable[[int], int] | None = None) -> None:
    with clients.producing(cluster, {"linger.ms": 20}) as producer:
        for i, value in enumerate(values):
            producer.produce(SHIPMENTS, key=f"s{i}".encode(), value=value.encode(),
                             partition=partition_of(i) if partition_of else i % SHIPMENTS_PARTITIONS)


def _held(cluster: ClusterConfig, topic: str, partitions: int) -> int:
    with clients.consuming(cluster, "dr-stream-demo-peek") as consumer:
        return sum(high - low for low, high in (consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                                                for p in range(partitions)))


def _wait_until(count: Callable[[], int], target: int, flows: list[Background], what: str, unit: str,
                timeout_s: float = 600.0, every_s: float = 5.0) -> bool:
    """Waits until count() reaches `target`, a progress line every `every_s`; False (said on
    stderr) when `timeout_s` passes first. Raises when a flow has failed."""
    began = time.monotonic()
    shown = began
    while (found := count()) < target:
        for flow in flows:
            flow.check()
        now = time.monotonic()
        if now - began > timeout_s:
            print(f"demo: waited {timeout_s:.0f}s for {what}: {found} of {target} {unit}", file=sys.stderr)
            return False
        if now - shown >= every_s:
            print(f"waiting for {what}: {found} of {target} {unit}, {now - began:.0f}s", flush=True)
            shown = now
        time.sleep(0.2)
    print(f"{what}: done in {time.monotonic() - began:.1f}s", flush=True)
    return True


def _failover_act(spark: SparkSession, configs: dict[str, FlowConfig], clusters: list[LocalCluster],
                  flows: ExitStack, threads: list[Background]) -> int:
    dc1, dc2 = (c.config for c in clusters)
    print(f"\n== failover: {SHIPMENTS_RECORDS} records into {SHIPMENTS} on dc1 only; group {GROUP} reads "
          f"{CONSUMED_PER_PARTITION} of each partition's {SHIPMENTS_RECORDS // SHIPMENTS_PARTITIONS} and commits")
    _produce_shipments(dc1, [f"shipment {i}" for i in range(SHIPMENTS_RECORDS)])
    committed = _consume_and_commit(dc1)
    # The story is "nothing written before the disaster is lost": the disaster waits until the
    # flow has copied every shipment and synced the group, however long this machine takes.
    if not _wait_until(lambda: _held(dc2, SHIPMENTS, SHIPMENTS_PARTITIONS), SHIPMENTS_RECORDS, threads,
                       f"the flow's copy of the {SHIPMENTS_RECORDS} shipments to dc2", "shipments on dc2"):
        return 1
    # dc2's copies start at offset 0 like dc1's, so the translated position is the same number.
    target = sum(committed.values())
    if not _wait_until(lambda: sum(_committed(dc2).values()) if _committed(dc2) == committed else 0, target, threads,
                       f"the flow's translation of group {GROUP}'s commits on dc1, synced to dc2",
                       "offsets committed on dc2"):
        return 1
    print(f"dc2 holds every shipment and the group's positions there: {dict(sorted(_committed(dc2).items()))}")

    print("dc1 goes away (flows stopped, broker stopped); 2 late shipments reached dc1 after the last copy")
    if not _stop_flows(flows):
        return 1
    _produce_shipments(dc1, [f"late shipment {i}" for i in range(LATE)], partition_of=lambda _: 0)
    clusters[0].stop()
    print(f"$ dr-stream failover --config conf/dc1-to-dc2.yaml --group {GROUP}")
    print(format_positions(failover(configs["dc1-to-dc2"], FlowTables.of(configs["dc1-to-dc2"]), GROUP)))

    resumed: dict[int, list[int]] = {p: [] for p in range(SHIPMENTS_PARTITIONS)}
    for partition, _, headers in _read_as_group(dc2):
        entry = newest_entry(headers, PROVENANCE_HEADER)
        if entry is None:
            raise RuntimeError(f"a record of {SHIPMENTS}[{partition}] on dc2 without its provenance header")
        resumed[partition].append(entry["offset"])
    reread = sum(1 for p, offsets in resumed.items() for o in offsets if o < committed[p])
    reread += sum(len(o) - len(set(o)) for o in resumed.values())
    per_partition = SHIPMENTS_RECORDS // SHIPMENTS_PARTITIONS
    skipped = sum(len(set(range(committed[p], per_partition)) - set(o)) for p, o in resumed.items())
    read = sum(len(o) for o in resumed.values())
    print(f"group {GROUP} resumed on dc2 and read {read} records: {reread} re-read, {skipped} skipped")
    if (reread, skipped, read) != (0, 0, SHIPMENTS_RECORDS - sum(committed.values())):
        return 1
    return _failback_act(spark, configs["dc2-to-dc1"], clusters, committed)


def _failback_act(spark: SparkSession, config: FlowConfig, clusters: list[LocalCluster],
                  committed: dict[int, int]) -> int:
    dc1, dc2 = (c.config for c in clusters)
    per_partition = SHIPMENTS_RECORDS // SHIPMENTS_PARTITIONS
    print(f"\n== failback: while dc1 is down, producers write {OUTAGE_RECORDS} shipments to dc2; group {GROUP} "
          f"reads the rest of dc1's shipments and {OUTAGE_CONSUMED} of the new ones per partition on dc2, commits")
    _produce_shipments(dc2, [f"dc2 shipment {i}" for i in range(OUTAGE_RECORDS)])
    seen = {f"shipment {i}" for i in range(SHIPMENTS_RECORDS)
            if i // SHIPMENTS_PARTITIONS < committed[i % SHIPMENTS_PARTITIONS]}
    on_dc2 = _read_as_group(dc2, per_partition - CONSUMED_PER_PARTITION + OUTAGE_CONSUMED, commit=True)
    seen |= {value for _, value, _ in on_dc2}
    print("dc1 comes back with its data")
    clusters[0].start()
    print(f"$ dr-stream failback --config conf/dc2-to-dc1.yaml --group {GROUP}")
    print(format_failback(failback(config, spark, GROUP, timeout_s=600)))

    on_dc1 = _shipments(dc1)
    outage = {f"dc2 shipment {i}" for i in range(OUTAGE_RECORDS)}
    left_out = {f"late shipment {i}" for i in range(LATE)}
    after = [value for _, value, _ in _read_as_group(dc1)]
    reread = len(set(after) & seen) + len(after) - len(set(after))
    skipped = len(on_dc1 - left_out - seen - set(after))
    extra = len(on_dc1) - SHIPMENTS_RECORDS - LATE - OUTAGE_RECORDS
    print(f"dc1 holds each of the {OUTAGE_RECORDS} shipments written to dc2 during the outage once: "
          f"{outage <= on_dc1}; dc1's own shipments copied back to it: {extra}")
    print(f"group {GROUP} moved back and resumed on dc1: read {len(after)} records, {reread} re-read, "
          f"{skipped} skipped (the {LATE} left-out late shipments sit before its position: it was already past "
          "the failover point on dc2)")
    ok = outage <= on_dc1 and len(on_dc1) == SHIPMENTS_RECORDS + LATE + OUTAGE_RECORDS and (reread, skipped) == (0, 0)
    return 0 if ok and len(after) == OUTAGE_RECORDS - OUTAGE_CONSUMED * SHIPMENTS_PARTITIONS else 1


if __name__ == "__main__":
    sys.exit(main())
