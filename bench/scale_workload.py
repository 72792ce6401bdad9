"""The scale bench's workload and what it reads from the outside.

A size is a partition count in topics of 10 partitions and a group count; group i reads topic
i mod topics and commits on each of its partitions. The bench loads a few records on every
partition, commits every group at the log end, and reads back, in one batch of requests per
round, the destination's log ends and the groups' positions there. A replicator may rename
topics (MirrorMaker 2 writes `src.<topic>`): `rename` maps a source topic to its copy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic, OffsetSpec

from bench.workloads import bench_cluster
from dr_stream.dev.workload import Positions, commit_positions, group_positions
from dr_stream.kafka import clients

PER_TOPIC = 10
Rename = Callable[[str], str]


@dataclass(frozen=True)
class Scale:
    partitions: int
    groups: int

    @property
    def per_topic(self) -> int:
        return min(PER_TOPIC, self.partitions)

    @property
    def topics(self) -> list[str]:
        return [f"sc.t{i:03d}" for i in range(max(1, self.partitions // PER_TOPIC))]

    @property
    def group_names(self) -> list[str]:
        return [f"bench-g{i:05d}" for i in range(self.groups)]

    def at(self, offset: int, rename: Rename = str) -> Positions:
        """Every group at `offset` on each partition of its topic (as `rename` names the topic)."""
        topics = self.topics
        return {g: {(rename(topics[i % len(topics)]), p): offset for p in range(self.per_topic)}
                for i, g in enumerate(self.group_names)}

    def label(self) -> str:
        return f"{self.partitions:,} partitions, {self.groups:,} groups"


def create_topics(bootstrap: str, scale: Scale) -> None:
    admin = clients.admin(bench_cluster(bootstrap))
    futures = admin.create_topics([NewTopic(t, scale.per_topic, 1) for t in scale.topics], operation_timeout=60)
    for future in futures.values():
        future.result(timeout=120)


def load(bootstrap: str, scale: Scale, per_partition: int, seq: int) -> None:
    """`per_partition` records of 128 bytes onto every partition."""
    producer = clients.producer(bench_cluster(bootstrap), {"linger.ms": 20})
    try:
        for topic in scale.topics:
            for p in range(scale.per_topic):
                for n in range(per_partition):
                    producer.produce(topic, f"{seq:04d}{n:04d}".encode() * 16, partition=p)
                    producer.poll(0)
        if producer.flush(60):
            raise TimeoutError(f"{len(producer)} records not acknowledged by the source within 60 s")
    finally:
        producer.close()


def log_ends_total(bootstrap: str, scale: Scale, rename: Rename = str) -> int:
    """The sum of the log ends of every copied partition; 0 while a topic is missing."""
    admin = clients.admin(bench_cluster(bootstrap))
    wanted = {TopicPartition(rename(t), p): OffsetSpec.latest() for t in scale.topics for p in range(scale.per_topic)}
    try:
        futures = admin.list_offsets(wanted, request_timeout=30)
        return sum(f.result(timeout=30).offset for f in futures.values())
    except KafkaException:
        return 0


def commit(bootstrap: str, positions: Positions, timeout_s: float = 120) -> dict[str, float]:
    return commit_positions(bootstrap, positions, timeout_s)


def positions(bootstrap: str, groups: Iterable[str]) -> Positions:
    """The groups' positions on a cluster, all fetched at once; a group whose coordinator does
    not answer this round is left out (asked again next round)."""
    return group_positions(bootstrap, groups, skip_unanswered=True)


def moved(before: Positions, now: Positions, wanted: Positions) -> set[str]:
    """Groups whose every wanted partition shows a position other than before: the commit made
    after `before` reached the destination (an exact replicator shows the source's offset, an
    approximate one a translation of it)."""
    return {g for g, at in wanted.items()
            if now.get(g) and all(k in now[g] and now[g][k] != before.get(g, {}).get(k) for k in at)}


def shown(now: Positions, wanted: Positions) -> bool:
    """Every group shows a position on every one of its partitions."""
    return all(now.get(g, {}).keys() >= at.keys() for g, at in wanted.items())


def exact(now: Positions, wanted: Positions) -> int:
    return sum(1 for g, at in wanted.items() if now.get(g) == at)
