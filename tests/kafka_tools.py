"""Small helpers the tests use to talk to the real test brokers."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from dr_stream.core.config import ClusterConfig
from dr_stream.dev import workload
from dr_stream.kafka import clients


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...]


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def admin(bootstrap: str) -> AdminClient:
    return clients.admin(ClusterConfig(f"test@{bootstrap}", bootstrap))


def create_topic(bootstrap: str, name: str, partitions: int = 3, config: dict[str, str] | None = None) -> None:
    workload.create_topics(bootstrap, {name: partitions}, config)


def create_on_both(source: str, destination: str, name: str, partitions: int) -> None:
    """The topic on both clusters while a flow that replicates it runs: the flow's topic sync
    may create it on the destination (or, active-active, on the source) between the two
    creations, with the same partition count, so a topic that exists by then is taken as made."""
    for bootstrap in (source, destination):
        try:
            create_topic(bootstrap, name, partitions)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            assert partition_count(bootstrap, name) == partitions, f"{name} on {bootstrap}: wrong partition count"


def add_partitions(bootstrap: str, name: str, total: int) -> None:
    client = admin(bootstrap)
    client.create_partitions([NewPartitions(name, total)])[name].result(timeout=30)


delete_topics = workload.delete_topics


def topic_config(bootstrap: str, name: str) -> dict[str, str]:
    """The topic's configs. On a cluster of three nodes a topic created a moment ago may not be
    known yet to the node the describe reaches (the creation reaches the others a little later):
    that node's UNKNOWN_TOPIC_OR_PART is asked again for up to 30 s."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    client = admin(bootstrap)
    resource = ConfigResource(ResourceType.TOPIC, name)
    deadline = time.monotonic() + 30
    while True:
        try:
            entries = client.describe_configs([resource])[resource].result(timeout=30)
            return {k: e.value for k, e in entries.items()}
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def set_topic_config(bootstrap: str, name: str, settings: dict[str, str]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    client = admin(bootstrap)
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()])
    client.incremental_alter_configs([resource])[resource].result(timeout=30)


def partition_count(bootstrap: str, name: str) -> int:
    topic = admin(bootstrap).list_topics(name, timeout=10).topics.get(name)
    return len(topic.partitions) if topic and not topic.error else 0


def partition_leaders(bootstrap: str, name: str) -> dict[int, int]:
    """Each partition's leader as the broker's metadata gives it (-1: none yet)."""
    topic = admin(bootstrap).list_topics(name, timeout=10).topics.get(name)
    return {p.id: p.leader for p in topic.partitions.values()} if topic and not topic.error else {}


def topic_exists(bootstrap: str, name: str) -> bool:
    topic = admin(bootstrap).list_topics(timeout=10).topics.get(name)
    return topic is not None and topic.error is None


def produce(bootstrap: str, topic: str, records: Iterable[dict], **config) -> int:
    return workload.produce(bootstrap, topic, records, **config)


def end_offsets(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    return workload.end_offsets(bootstrap, topic, partition_count(bootstrap, topic))


def count(bootstrap: str, topic: str) -> int:
    """Records in the topic (end - start per partition; no transactions or compaction in play)."""
    return sum(high - low for low, high in end_offsets(bootstrap, topic).values())


def count_once_created(bootstrap: str, topic: str) -> int:
    """`count`, or 0 while the topic does not exist yet (a replicator about to create it)."""
    try:
        return count(bootstrap, topic)
    except Exception:
        return 0


def consume_all(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[Record]:
    marks = end_offsets(bootstrap, topic)
    return read_range(bootstrap, topic, {p: low for p, (low, _) in marks.items()}, marks, isolation)


def read_range(bootstrap: str, topic: str, start: dict[int, int], marks: dict[int, tuple[int, int]],
               isolation: str = "read_committed") -> list[Record]:
    """Every record from `start[p]` up to the end offset in `marks[p]`, per partition."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": unique("dr-stream-tests-"), "enable.auto.commit": False,
        "isolation.level": isolation, "enable.partition.eof": True,
    })
    out: list[Record] = []
    try:
        pending = {p for p in start if marks[p][1] > start[p]}
        consumer.assign([TopicPartition(topic, p, start[p]) for p in pending])
        deadline = time.monotonic() + 60
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10000, timeout=clients.CONSUME_WAIT_S):
                if msg.error():
                    pending.discard(msg.partition())
                    continue
                out.append(Record(msg.key(), msg.value(), msg.partition(), msg.offset(), msg.timestamp()[1],
                                  tuple(msg.headers() or ())))
                if msg.offset() >= marks[msg.partition()][1] - 1:
                    pending.discard(msg.partition())
    finally:
        consumer.close()
    return out


def assert_copied_exactly_once(bootstrap: str, topic: str, total: int) -> None:
    """The topic holds `total` records and each origin (partition, offset) once: nothing lost
    or duplicated across whatever interrupted the copy."""
    records = consume_all(bootstrap, topic)
    origins = Counter((r.partition, provenance(r)[-1]["offset"]) for r in records)
    assert len(records) == total, f"{len(records) - total:+d} records"
    assert set(origins.values()) == {1}, [origin for origin, n in origins.items() if n > 1][:10]


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def delete_records_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    """Moves the partition's log start to `offset`, as retention would."""
    client = admin(bootstrap)
    futures = client.delete_records([TopicPartition(topic, partition, offset)])
    for future in futures.values():
        future.result(timeout=30)


def consume_and_commit(bootstrap: str, topic: str, group: str, upto: dict[int, int], helper: bool) -> None:
    """A consumer of `group` reads each partition from its start up to offset `upto[p]` (exclusive)
    and commits there; with `helper`, through dr-stream's ConsumerTimestamps, else as an
    unmodified application would."""
    from dr_stream.positions.consumer_timestamps import ConsumerTimestamps

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    stamps = ConsumerTimestamps(consumer, group, {"bootstrap.servers": bootstrap}) if helper else None
    try:
        marks = end_offsets(bootstrap, topic)
        wanted = {p: o for p, o in upto.items() if o > marks[p][0]}
        consumer.assign([TopicPartition(topic, p, marks[p][0]) for p in wanted])
        last: dict[int, int] = {}
        deadline = time.monotonic() + 120
        while any(last.get(p, -1) < o - 1 for p, o in wanted.items()) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=5000, timeout=clients.CONSUME_WAIT_S):
                p = msg.partition()
                if msg.error() or msg.offset() >= wanted[p]:
                    continue
                last[p] = msg.offset()
                if stamps:
                    stamps.observe(msg)
        assert all(last.get(p) == o - 1 for p, o in wanted.items()), f"could not read up to {wanted}: {last}"
        if stamps:
            stamps.commit()
            stamps.close()
        else:
            consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in wanted.items()], asynchronous=False)
    finally:
        consumer.close()


_COORDINATOR_MOVING = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                       KafkaError.COORDINATOR_LOAD_IN_PROGRESS)


def committed(bootstrap: str, group: str, topic: str, partitions: int, timeout_s: float = 15) -> dict[int, int]:
    """The group's committed offsets. A coordinator that is still coming up (a broker started a
    moment ago) answers NOT_COORDINATOR or loading for a while: asked again until `timeout_s`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)],
                                           timeout=max(1.0, deadline - time.monotonic()))
                return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
            except KafkaException as error:
                if error.args[0].code() not in _COORDINATOR_MOVING or time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def resume_as_group(bootstrap: str, topic: str, group: str, partitions: int) -> list[Record]:
    """What `group` reads on this cluster from its committed offsets to the current end."""
    marks = end_offsets(bootstrap, topic)
    start = committed(bootstrap, group, topic, partitions)
    assert set(start) == set(range(partitions)), f"group {group} has no committed offset for some partitions: {start}"
    return read_range(bootstrap, topic, start, marks)


def provenance(record: Record) -> list[dict]:
    """The record's provenance entries that parse (a test may plant one that does not)."""
    from dr_stream.core.provenance import entries

    return [e for e in entries(record.headers, "__replicator_id") if e is not None]


def _resource_type(kind: str):
    """Kafka's resource type by its kafka-acls name (confluent-kafka calls the cluster BROKER)."""
    from confluent_kafka.admin import ResourceType

    return ResourceType["BROKER" if kind == "CLUSTER" else kind]


def grant(bootstrap: str, principal: str, rules: Iterable[tuple[str, str, str, str]], permission: str = "ALLOW"
          ) -> None:
    """ACLs for `principal` (e.g. "User:drs"): (resource type, name, pattern type, operation) each,
    by their confluent-kafka enum names (("TOPIC", "*", "LITERAL", "READ")); `permission`: ALLOW or DENY."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType

    bindings = [AclBinding(_resource_type(kind), name, ResourcePatternType[pattern], principal, "*",
                           AclOperation[operation], AclPermissionType[permission])
                for kind, name, pattern, operation in dict.fromkeys(rules)]
    client = admin(bootstrap)  # the client must outlive its futures
    for future in client.create_acls(bindings).values():
        future.result(timeout=30)


def revoke(bootstrap: str, principal: str, rules: Iterable[tuple[str, str, str, str]], permission: str = "ALLOW"
           ) -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
    )

    filters = [AclBindingFilter(_resource_type(kind), name, ResourcePatternType[pattern], principal, "*",
                                AclOperation[operation], AclPermissionType[permission])
               for kind, name, pattern, operation in dict.fromkeys(rules)]
    client = admin(bootstrap)
    for future in client.delete_acls(filters).values():
        future.result(timeout=30)


def commit_groups(bootstrap: str, positions: dict[str, dict[tuple[str, int], int]]) -> None:
    """Commits each group's positions (group -> (topic, partition) -> offset) as its application
    would, all requests in flight at once: a thousand groups take seconds, not a consumer each."""
    workload.commit_positions(bootstrap, positions, timeout_s=60)


def group_positions(bootstrap: str, groups: Iterable[str]) -> dict[str, dict[tuple[str, int], int]]:
    """Each group's committed positions (group -> (topic, partition) -> offset), fetched at once."""
    return workload.group_positions(bootstrap, groups)


def delete_groups(bootstrap: str, groups: Iterable[str]) -> None:
    """Deletes the groups that exist; a group that does not is no error."""
    groups = list(groups)
    if not groups:
        return
    client = admin(bootstrap)
    for future in client.delete_consumer_groups(groups, request_timeout=60).values():
        try:
            future.result(timeout=60)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:
                raise


def forget_prefixed(bootstrap: str, topic_prefix: str, group_prefix: str, attempts: int = 3) -> None:
    """Deletes the topics and groups a test module made (its names' prefixes), so the session's
    clusters do not carry them into the modules after it. A broker busy with the rest of the
    suite may let one round's request outlive its timeout (a bare `TimeoutError` from a future
    once failed a whole run here), so the round is tried again with a new client."""
    from dr_stream.kafka.group_offsets.consumer_groups import list_groups

    for attempt in range(1, attempts + 1):
        client = admin(bootstrap)  # held while its futures run
        try:
            delete_topics(bootstrap, [t for t in client.list_topics(timeout=10).topics if t.startswith(topic_prefix)])
            delete_groups(bootstrap, [g for g in list_groups(client, timeout=30) if g.startswith(group_prefix)])
            return
        except (TimeoutError, KafkaException) as exc:
            if attempt == attempts:
                raise AssertionError(f"{bootstrap}: {topic_prefix}* and {group_prefix}* not deleted in {attempts} "
                                     f"rounds: {type(exc).__name__}: {exc}") from exc


def stay_subscribed(bootstrap: str, topic: str, group: str, stop: threading.Event) -> None:
    """A member of `group` on `topic` until `stop`: the group is STABLE meanwhile."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "latest"})
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            consumer.poll(0.2)
    finally:
        consumer.close()


def group_state(bootstrap: str, group: str) -> str:
    from dr_stream.kafka.group_offsets.consumer_groups import group_states

    found = group_states(admin(bootstrap), [group])[group]
    if isinstance(found, Exception):
        raise found
    return found[0]
