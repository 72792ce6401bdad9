"""What the tests and the benchmarks do to a cluster as its applications would: create topics,
write records, read where the logs end, commit and read group positions.

One place for both, so a benchmark measures the workload the tests check. Clients come from
`kafka/clients` (their log lines through Python logging) with no settings beyond the ones asked for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from dr_stream.core.config import ClusterConfig
from dr_stream.kafka import clients

Positions = dict[str, dict[tuple[str, int], int]]  # group -> (topic, partition) -> offset


def workload_cluster(bootstrap: str) -> ClusterConfig:
    return ClusterConfig(f"workload@{bootstrap}", bootstrap)


def create_topics(bootstrap: str, topics: Mapping[str, int], config: Mapping[str, str] | None = None) -> None:
    """Each topic with its partition count and the cluster's default replication factor (3 on
    `dev up --brokers 3`); raises if one exists."""
    admin = clients.admin(workload_cluster(bootstrap))  # the client must outlive its futures
    futures = admin.create_topics([NewTopic(t, n, -1, config=dict(config or {})) for t, n in topics.items()])
    for future in futures.values():
        future.result(timeout=30)


def delete_topics(bootstrap: str, names: Iterable[str]) -> None:
    """Deletes those of `names` that exist."""
    admin = clients.admin(workload_cluster(bootstrap))
    existing = set(admin.list_topics(timeout=10).topics)
    names = [n for n in names if n in existing]
    if names:
        for future in admin.delete_topics(names, operation_timeout=30).values():
            future.result(timeout=30)


def produce(bootstrap: str, topic: str, records: Iterable[Mapping[str, Any]],
            progress: Callable[[int], None] | None = None, **settings: Any) -> int:
    """Writes each record (the keyword arguments of `Producer.produce`: key, value, partition,
    headers...), waiting for room when the producer's queue is full; `progress` hears the count
    every 100,000 records. Returns the count once every record is acknowledged."""
    producer = clients.producer(workload_cluster(bootstrap), {"linger.ms": 5, **settings})
    n = 0
    for record in records:
        while True:
            try:
                producer.produce(topic, **record)
                break
            except BufferError:
                producer.poll(0.05)
        n += 1
        if n % 100_000 == 0:
            producer.poll(0)
            if progress:
                progress(n)
    if producer.flush(120):
        raise RuntimeError(f"{topic}: records not acknowledged within 120 s")
    return n


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """(log start, log end) of each partition, retried while a new partition has no leader yet."""
    consumer = clients.consumer(workload_cluster(bootstrap), "dr-stream-workload-peek")
    try:
        return {p: _watermarks(consumer, topic, p) for p in range(partitions)}
    finally:
        consumer.close()


# Errors a partition the caller knows of answers for a moment after its topic was made: no
# leader yet, or this client's metadata does not hold it yet (a cluster of three nodes tells
# the node this client asks a little after the one that made it).
_SETTLING = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError._UNKNOWN_PARTITION)


def _watermarks(consumer: Consumer, topic: str, partition: int) -> tuple[int, int]:
    deadline = time.monotonic() + 30
    while True:
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        except KafkaException as exc:
            error = exc.args[0]
            if not (error.code() in _SETTLING or error.retriable()) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def commit_positions(bootstrap: str, positions: Positions, timeout_s: float = 120) -> dict[str, float]:
    """Commits every group's positions, all requests in flight at once, as applications would;
    returns when each group's commit was acknowledged (monotonic seconds). A commit refused
    for a partition (a coordinator still loading on a new cluster: the request succeeds, the
    partition carries the error) is made again until `timeout_s`."""
    admin = clients.admin(workload_cluster(bootstrap))
    done: dict[str, float] = {}
    deadline = time.monotonic() + timeout_s
    todo = dict(positions)
    while todo:
        futures = {}
        for group, at in todo.items():
            request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in at.items()])
            futures[group] = next(iter(admin.alter_consumer_group_offsets([request], request_timeout=60).values()))
            futures[group].add_done_callback(partial(_mark_done, done, group))
        refused = {}
        for group, future in futures.items():
            result = future.result(timeout=120)
            errors = [tp.error for tp in result.topic_partitions if tp.error is not None]
            if errors:
                refused[group] = errors[0]
                done.pop(group, None)
        if refused and time.monotonic() > deadline:
            raise RuntimeError(f"{len(refused)} groups' commits refused, e.g. {next(iter(refused.items()))}")
        todo = {g: todo[g] for g in refused}
        time.sleep(0.5 if todo else 0)
    return done


def _mark_done(done: dict[str, float], group: str, _future: object) -> None:
    done.setdefault(group, time.monotonic())


def group_positions(bootstrap: str, groups: Iterable[str], skip_unanswered: bool = False) -> Positions:
    """Each group's committed positions, all fetched at once. A group whose coordinator does not
    answer raises, or with `skip_unanswered` is left out (a polling caller asks again)."""
    admin = clients.admin(workload_cluster(bootstrap))
    futures = {g: f for g in groups
               for f in admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)],
                                                          request_timeout=60).values()}
    out: Positions = {}
    for group, future in futures.items():
        try:
            found = future.result(timeout=60).topic_partitions
        except KafkaException:
            if not skip_unanswered:
                raise
            continue
        out[group] = {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}
    return out
