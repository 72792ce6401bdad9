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

import shutil
import sys
import threading
import time
from dataclasses import replace

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from dr_stream.already_copied import origin_of
from dr_stream.config import FlowConfig, load_flow
from dr_stream.dev import dev_clusters
from dr_stream.groups import committed_offsets, list_groups
from dr_stream.paths import cache_dir, project_root
from dr_stream.topics import admin_client, partition_counts

TOPICS = {"demo.orders": 3, "demo.payments": 2}
PER_TOPIC = 5000
SHIPMENTS, SHIPMENTS_PARTITIONS, SHIPMENTS_RECORDS, CONSUMED_PER_PARTITION = "demo.shipments", 3, 9000, 2000
GROUP = "demo-shipping"
LATE, OUTAGE_RECORDS, OUTAGE_CONSUMED = 2, 600, 50


def _fresh_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = admin_client({"bootstrap.servers": bootstrap})
    for group in ([GROUP] if GROUP in list_groups(admin) else []):
        admin.delete_consumer_groups([group])[group].exception(timeout=30)
    stale = [t for t in topics if t in partition_counts(admin)]
    if stale:
        for future in admin.delete_topics(stale, operation_timeout=30).values():
            future.result(timeout=30)
        while any(t in partition_counts(admin) for t in stale):
            time.sleep(0.5)
    created = admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()])
    for future in created.values():
        future.result(timeout=30)


def _produce(bootstrap: str, alias: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for topic in TOPICS:
        for i in range(PER_TOPIC):
            producer.produce(topic, key=f"{alias}-{i % 100}".encode(), value=f"{alias}:{topic}:{i}".encode(),
                             headers=[("origin", alias.encode())])
            if i % 2000 == 0:
                producer.poll(0)
    producer.flush(30)


def _counts(bootstrap: str) -> dict[str, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dr-stream-demo-peek"})
    try:
        out = {}
        for topic, partitions in TOPICS.items():
            marks = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)]
            out[topic] = sum(high - low for low, high in marks)
        return out
    finally:
        consumer.close()


def main() -> int:
    from dr_stream.flow import ReplicationFlow, run_until_stopped
    from dr_stream.session import spark_session

    clusters = dev_clusters()
    started = [c for c in clusters if not c.is_running()]
    for cluster in clusters:
        print(f"{cluster.alias}: {'starting' if cluster in started else 'already running'} on {cluster.bootstrap}")
        cluster.start()
    spark = None
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        for cluster in clusters:
            _fresh_topics(cluster.bootstrap, {**TOPICS, SHIPMENTS: SHIPMENTS_PARTITIONS})
            _produce(cluster.bootstrap, cluster.alias)
        print(f"produced {PER_TOPIC} records into each of {', '.join(TOPICS)} in both dc1 and dc2")

        work = cache_dir() / "demo"
        shutil.rmtree(work, ignore_errors=True)
        spark = spark_session("dr-stream-demo")
        spark.sparkContext.setLogLevel("ERROR")
        configs: dict[str, FlowConfig] = {}
        for name in ("dc1-to-dc2", "dc2-to-dc1"):
            config = load_flow(project_root() / "conf" / f"{name}.yaml")
            configs[name] = config = replace(config, streaming=replace(
                config.streaming, checkpoint_dir=str(work / name / "checkpoints"),
                offset_index=str(work / name / "offset-index"), translations=str(work / name / "translations")))
            flow = ReplicationFlow(config, spark)
            thread = threading.Thread(target=run_until_stopped, args=(flow, stop), daemon=True)
            thread.start()
            threads.append(thread)

        expected = 2 * PER_TOPIC
        began, stable_since, last = time.monotonic(), None, None
        while time.monotonic() - began < 300:
            time.sleep(2)
            now = {c.alias: _counts(c.bootstrap) for c in clusters}
            print("counts: " + "  ".join(f"{alias} {t}={n}" for alias, per in now.items() for t, n in per.items()),
                  flush=True)
            done = all(n == expected for per in now.values() for n in per.values())
            if done and stable_since is None:
                stable_since = time.monotonic()
                elapsed = stable_since - began
                rate = 2 * PER_TOPIC * len(TOPICS) / elapsed
                print(f"both clusters hold all {expected} records per topic after {elapsed:.1f}s "
                      f"({rate:.0f} records/s replicated across both flows)")
            if done and now == last and time.monotonic() - stable_since >= 10:
                print("counts stable for 10s: every record exactly once in each cluster, nothing loops")
                return _failover_act(spark, configs, clusters, stop, threads)
            if not done:
                stable_since = None
            last = now
        print("demo: counts did not converge within 300s", file=sys.stderr)
        return 1
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        if spark is not None:
            spark.stop()
        for cluster in clusters:
            if cluster in started:
                cluster.stop()
                print(f"{cluster.alias}: stopped")
            elif not cluster.is_running():  # the failover act took down a cluster that was up before
                cluster.start()
                print(f"{cluster.alias}: started again, as it was before the demo")


def _consume_and_commit(bootstrap: str) -> dict[int, int]:
    """An ordinary application: reads CONSUMED_PER_PARTITION records of each partition, commits."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(SHIPMENTS, p, 0) for p in range(SHIPMENTS_PARTITIONS)])
        read = dict.fromkeys(range(SHIPMENTS_PARTITIONS), 0)
        while any(n < CONSUMED_PER_PARTITION for n in read.values()):
            for msg in consumer.consume(num_messages=1000, timeout=1):
                if not msg.error() and msg.offset() < CONSUMED_PER_PARTITION:
                    read[msg.partition()] += 1
        offsets = dict.fromkeys(range(SHIPMENTS_PARTITIONS), CONSUMED_PER_PARTITION)
        consumer.commit(offsets=[TopicPartition(SHIPMENTS, p, o) for p, o in offsets.items()], asynchronous=False)
        return offsets
    finally:
        consumer.close()


def _committed(bootstrap: str) -> dict[int, int]:
    found = committed_offsets(admin_client({"bootstrap.servers": bootstrap}), GROUP)
    return {p: c.offset for (t, p), c in found.items() if t == SHIPMENTS}


def _read_as_group(bootstrap: str, per_partition: int | None = None, commit: bool = False) -> list:
    """The group reads from its committed offsets, to the end or `per_partition` records each
    (then commits there): (partition, value, headers) in the order read."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        starts = _committed(bootstrap)
        consumer.assign([TopicPartition(SHIPMENTS, p, o) for p, o in starts.items()])
        read: dict[int, list] = {p: [] for p in starts}
        open_partitions = set(starts)
        while open_partitions:
            for msg in consumer.consume(num_messages=1000, timeout=2):
                p = msg.partition()
                if msg.error() or (per_partition is not None and len(read[p]) >= per_partition):
                    open_partitions.discard(p)
                    continue
                read[p].append(msg)
        if commit:
            consumer.commit(offsets=[TopicPartition(SHIPMENTS, p, msgs[-1].offset() + 1)
                                     for p, msgs in read.items() if msgs], asynchronous=False)
        return [(m.partition(), m.value().decode(), m.headers()) for msgs in read.values() for m in msgs]
    finally:
        consumer.close()


def _shipments(bootstrap: str) -> set[str]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dr-stream-demo-peek",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(SHIPMENTS, p, 0) for p in range(SHIPMENTS_PARTITIONS)])
        found, open_partitions = [], set(range(SHIPMENTS_PARTITIONS))
        while open_partitions:
            for msg in consumer.consume(num_messages=1000, timeout=2):
                if msg.error():
                    open_partitions.discard(msg.partition())
                else:
                    found.append(msg.value().decode())
        assert len(found) == len(set(found)), "a shipment is in the topic twice"
        return set(found)
    finally:
        consumer.close()


def _failover_act(spark, configs: dict[str, FlowConfig], clusters, stop: threading.Event, threads) -> int:
    from dr_stream.failover import failover, format_positions

    dc1, dc2 = clusters
    print(f"\n== failover: {SHIPMENTS_RECORDS} records into {SHIPMENTS} on dc1 only; group {GROUP} reads "
          f"{CONSUMED_PER_PARTITION} of each partition's {SHIPMENTS_RECORDS // SHIPMENTS_PARTITIONS} and commits")
    producer = Producer({"bootstrap.servers": dc1.bootstrap, "linger.ms": 20})
    for i in range(SHIPMENTS_RECORDS):
        producer.produce(SHIPMENTS, key=f"s{i}".encode(), value=f"shipment {i}".encode(),
                         partition=i % SHIPMENTS_PARTITIONS)
    producer.flush(30)
    committed = _consume_and_commit(dc1.bootstrap)
    began = time.monotonic()
    # dc2's copies start at offset 0 like dc1's, so the translated position is the same number.
    while time.monotonic() - began < 120 and _committed(dc2.bootstrap) != committed:
        time.sleep(0.2)
    print(f"the flow translated the commits and synced them to dc2 {time.monotonic() - began:.1f}s after the "
          f"commit on dc1: {dict(sorted(_committed(dc2.bootstrap).items()))}")

    print("dc1 goes away (flows stopped, broker stopped); 2 late shipments reached dc1 after the last copy")
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    late = Producer({"bootstrap.servers": dc1.bootstrap})
    for i in range(LATE):
        late.produce(SHIPMENTS, value=f"late shipment {i}".encode(), partition=0)
    late.flush(30)
    dc1.stop()
    print(f"$ dr-stream failover --config conf/dc1-to-dc2.yaml --group {GROUP}")
    print(format_positions(failover(configs["dc1-to-dc2"], spark, GROUP)))

    resumed = {p: [] for p in range(SHIPMENTS_PARTITIONS)}
    for partition, _, headers in _read_as_group(dc2.bootstrap):
        resumed[partition].append(origin_of(headers, "__replicator_id")["offset"])
    reread = sum(1 for p, offsets in resumed.items() for o in offsets if o < committed[p])
    reread += sum(len(o) - len(set(o)) for o in resumed.values())
    per_partition = SHIPMENTS_RECORDS // SHIPMENTS_PARTITIONS
    skipped = sum(len(set(range(committed[p], per_partition)) - set(o)) for p, o in resumed.items())
    read = sum(len(o) for o in resumed.values())
    print(f"group {GROUP} resumed on dc2 and read {read} records: {reread} re-read, {skipped} skipped")
    if (reread, skipped, read) != (0, 0, SHIPMENTS_RECORDS - sum(committed.values())):
        return 1
    return _failback_act(spark, configs["dc2-to-dc1"], clusters, committed)


def _failback_act(spark, config: FlowConfig, clusters, committed: dict[int, int]) -> int:
    from dr_stream.failback import failback, format_failback

    dc1, dc2 = clusters
    per_partition = SHIPMENTS_RECORDS // SHIPMENTS_PARTITIONS
    print(f"\n== failback: while dc1 is down, producers write {OUTAGE_RECORDS} shipments to dc2; group {GROUP} "
          f"reads the rest of dc1's shipments and {OUTAGE_CONSUMED} of the new ones per partition on dc2, commits")
    producer = Producer({"bootstrap.servers": dc2.bootstrap, "linger.ms": 20})
    for i in range(OUTAGE_RECORDS):
        producer.produce(SHIPMENTS, value=f"dc2 shipment {i}".encode(), partition=i % SHIPMENTS_PARTITIONS)
    producer.flush(30)
    seen = {f"shipment {i}" for i in range(SHIPMENTS_RECORDS)
            if i // SHIPMENTS_PARTITIONS < committed[i % SHIPMENTS_PARTITIONS]}
    on_dc2 = _read_as_group(dc2.bootstrap, per_partition - CONSUMED_PER_PARTITION + OUTAGE_CONSUMED, commit=True)
    seen |= {value for _, value, _ in on_dc2}
    print("dc1 comes back with its data")
    dc1.start()
    print(f"$ dr-stream failback --config conf/dc2-to-dc1.yaml --group {GROUP}")
    report = failback(config, spark, GROUP, timeout_s=600)
    print(format_failback(report))

    on_dc1 = _shipments(dc1.bootstrap)
    outage = {f"dc2 shipment {i}" for i in range(OUTAGE_RECORDS)}
    left_out = {f"late shipment {i}" for i in range(LATE)}
    after = [value for _, value, _ in _read_as_group(dc1.bootstrap)]
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
