"""`make demo`: active-active dc1 <-> dc2 on sample data, printed as it happens.

Starts the local clusters (unless already up), writes sample records under the same topic
names in both, runs both flows in one Spark application, and prints per-topic counts until
both clusters hold every record once and the counts stay put (no loop). Stops what it started.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from dataclasses import replace

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from dr_stream.config import load_flow
from dr_stream.dev import dev_clusters
from dr_stream.paths import cache_dir, project_root
from dr_stream.topics import admin_client, partition_counts

TOPICS = {"demo.orders": 3, "demo.payments": 2}
PER_TOPIC = 5000


def _fresh_topics(bootstrap: str) -> None:
    admin = admin_client({"bootstrap.servers": bootstrap})
    stale = [t for t in TOPICS if t in partition_counts(admin)]
    if stale:
        for future in admin.delete_topics(stale, operation_timeout=30).values():
            future.result(timeout=30)
        while any(t in partition_counts(admin) for t in stale):
            time.sleep(0.5)
    created = admin.create_topics([NewTopic(t, n, 1) for t, n in TOPICS.items()])
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
            _fresh_topics(cluster.bootstrap)
            _produce(cluster.bootstrap, cluster.alias)
        print(f"produced {PER_TOPIC} records into each of {', '.join(TOPICS)} in both dc1 and dc2")

        work = cache_dir() / "demo"
        shutil.rmtree(work, ignore_errors=True)
        spark = spark_session("dr-stream-demo")
        spark.sparkContext.setLogLevel("ERROR")
        for name in ("dc1-to-dc2", "dc2-to-dc1"):
            config = load_flow(project_root() / "conf" / f"{name}.yaml")
            config = replace(config, streaming=replace(
                config.streaming, checkpoint_dir=str(work / name / "checkpoints"),
                offset_index=str(work / name / "offset-index")))
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
                return 0
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
        for cluster in started:
            cluster.stop()
            print(f"{cluster.alias}: stopped")


if __name__ == "__main__":
    sys.exit(main())
