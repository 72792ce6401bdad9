"""Thin helpers over the admin API: cluster identity, topics, partitions, log bounds, configs.

Each takes an admin client from `dr_stream.kafka.clients` and returns plain values, so the
rules that use them stay free of Kafka types.
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from dr_stream.core.policy import TopicFilter

# Topic configs that describe one cluster rather than the data, so they are not copied:
# broker-id throttles, durability tied to the destination's own replication factor, tiered
# storage, and the timestamp rules (the destination must keep the source's timestamps, so it
# stays CreateTime and accepts records stamped long ago).
CLUSTER_LOCAL_CONFIGS = frozenset({
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "message.timestamp.type",
    "message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms",
    "remote.storage.enable",
    "local.retention.ms",
    "local.retention.bytes",
    "confluent.placement.constraints",
})


def partition_counts(admin: AdminClient, timeout: float = 15.0) -> dict[str, int]:
    return {name: len(t.partitions) for name, t in admin.list_topics(timeout=timeout).topics.items()}


def topic_ids(admin: AdminClient, topics: list[str], timeout: float = 15.0) -> dict[str, str]:
    """Each existing topic's id (a topic deleted and created again under its name gets a new one);
    topics that do not exist are left out."""
    if not topics:
        return {}
    from confluent_kafka import TopicCollection

    out = {}
    for name, future in admin.describe_topics(TopicCollection(sorted(set(topics))), request_timeout=timeout).items():
        try:
            out[name] = str(future.result(timeout=timeout).topic_id)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
    return out


def matching_partitions(admin: AdminClient, topic_filter: TopicFilter,
                        timeout: float = 15.0) -> list[tuple[str, int]]:
    """Every (topic, partition) of the cluster whose topic the filter selects."""
    return [(t, p) for t, n in partition_counts(admin, timeout).items() if topic_filter.matches(t) for p in range(n)]


def log_bounds(admin: AdminClient, partitions: list[tuple[str, int]],
               timeout: float = 15.0) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (log start offset, log end offset); partitions that do not exist are left out."""
    if not partitions:
        return {}
    existing = partition_counts(admin, timeout)
    wanted = sorted({(t, p) for t, p in partitions if p < existing.get(t, 0)})
    if not wanted:
        return {}
    # both requests in flight at once: each is a round trip per partition leader
    starts, ends = (admin.list_offsets({TopicPartition(t, p): spec for t, p in wanted}, request_timeout=timeout)
                    for spec in (OffsetSpec.earliest(), OffsetSpec.latest()))
    start_of = {(tp.topic, tp.partition): f.result(timeout=timeout).offset for tp, f in starts.items()}
    return {(tp.topic, tp.partition): (start_of[(tp.topic, tp.partition)], f.result(timeout=timeout).offset)
            for tp, f in ends.items()}


def copyable_configs(admin: AdminClient, topic: str, timeout: float = 15.0) -> dict[str, str]:
    """The topic-level overrides set on `topic`, less the cluster-local ones."""
    found = copyable_configs_of(admin, [topic], timeout)[topic]
    if isinstance(found, Exception):
        raise found
    return found


def copyable_configs_of(admin: AdminClient, topics: list[str],
                        timeout: float = 15.0) -> dict[str, dict[str, str] | Exception]:
    """`copyable_configs` of many topics in one describe request; a topic whose describe
    failed (a refused ACL) maps to its error."""
    if not topics:
        return {}
    resources = {topic: ConfigResource(ResourceType.TOPIC, topic) for topic in topics}
    futures = admin.describe_configs(list(resources.values()), request_timeout=timeout)
    out: dict[str, dict[str, str] | Exception] = {}
    for topic, resource in resources.items():
        try:
            entries = futures[resource].result(timeout=timeout)
        except KafkaException as exc:
            out[topic] = exc
            continue
        out[topic] = {name: entry.value for name, entry in entries.items()
                      if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
                      and name not in CLUSTER_LOCAL_CONFIGS and entry.value is not None}
    return out


def settle_topic_configs(admin: AdminClient, topic: str, wanted: dict[str, str],
                         timeout: float = 15.0) -> dict[str, str]:
    """Sets each of `wanted` that the topic does not have as its own override (a topic made by an
    older release); returns what was set."""
    have = copyable_configs(admin, topic, timeout)
    changed = {k: v for k, v in wanted.items() if have.get(k) != v}
    if changed:
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sorted(changed.items())])
        admin.incremental_alter_configs([resource])[resource].result(timeout=timeout)
    return changed


def create_topic(admin: AdminClient, topic: str, partitions: int, configs: dict[str, str] | None = None,
                 timeout: float = 30.0) -> bool:
    """Creates the topic with the cluster's default replication factor (its broker count need not
    match the other cluster's); False when it already existed."""
    created = create_topics(admin, {topic: (partitions, configs or {})}, timeout)[topic]
    if isinstance(created, Exception):
        raise created
    return created


def create_topics(admin: AdminClient, topics: dict[str, tuple[int, dict[str, str]]],
                  timeout: float = 30.0) -> dict[str, bool | Exception]:
    """`create_topic` for many topics in one request: topic -> (partitions, configs) in; topic ->
    True (created), False (it existed already) or its error out."""
    if not topics:
        return {}
    new = [NewTopic(t, num_partitions=n, replication_factor=-1, config=configs) for t, (n, configs) in topics.items()]
    out: dict[str, bool | Exception] = {}
    for topic, future in admin.create_topics(new, request_timeout=timeout).items():
        try:
            future.result(timeout=timeout)
            out[topic] = True
        except KafkaException as exc:
            out[topic] = False if "TOPIC_ALREADY_EXISTS" in str(exc) else exc
    return out


def delete_topics(admin: AdminClient, topics: list[str], timeout: float = 30.0) -> None:
    """Deletes those of `topics` that exist and returns once the cluster no longer lists them
    (deletion is asynchronous on the broker; a topic created again too soon would fail)."""
    stale = [t for t in topics if t in partition_counts(admin)]
    if not stale:
        return
    for future in admin.delete_topics(stale, operation_timeout=timeout).values():
        future.result(timeout=timeout)
    while any(t in partition_counts(admin) for t in stale):
        time.sleep(0.5)


def answers(admin: AdminClient, timeout: float = 3.0) -> bool:
    """Whether the cluster answers a metadata request within `timeout` (librdkafka asks a broker;
    with none connected the request fails instead of reading a cache)."""
    try:
        admin.list_topics(timeout=timeout)
        return True
    except KafkaException:
        return False
