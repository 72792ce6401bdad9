"""Destination topics: created before the first write and kept in step with the source.

Invariants: a topic the flow will write to exists on the destination with at least the
source's partition count before its records are written; every creation, partition
increase and config change is reported on the flow's log.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from dr_stream.policy import TopicFilter, TopicRenamer

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


def admin_client(properties: dict[str, str]) -> AdminClient:
    return AdminClient(dict(properties))


def cluster_id(admin: AdminClient, timeout: float = 15.0) -> str:
    return admin.describe_cluster(request_timeout=timeout).result(timeout=timeout).cluster_id


def partition_counts(admin: AdminClient, timeout: float = 15.0) -> dict[str, int]:
    return {name: len(t.partitions) for name, t in admin.list_topics(timeout=timeout).topics.items()}


def matching_partitions(admin: AdminClient, topic_filter: TopicFilter,
                        timeout: float = 15.0) -> list[tuple[str, int]]:
    """Every (topic, partition) of the cluster whose topic the filter selects."""
    return [(t, p) for t, n in partition_counts(admin, timeout).items() if topic_filter.matches(t) for p in range(n)]


def log_bounds(admin: AdminClient, partitions: list[tuple[str, int]],
               timeout: float = 15.0) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (log start offset, log end offset); partitions that do not exist are left out."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    if not partitions:
        return {}
    existing = partition_counts(admin, timeout)
    wanted = sorted({(t, p) for t, p in partitions if p < existing.get(t, 0)})
    if not wanted:
        return {}
    bounds: dict[tuple[str, int], list[int]] = {}
    for spec, slot in ((OffsetSpec.earliest(), 0), (OffsetSpec.latest(), 1)):
        futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in wanted}, request_timeout=timeout)
        for tp, future in futures.items():
            bounds.setdefault((tp.topic, tp.partition), [0, 0])[slot] = future.result(timeout=timeout).offset
    return {k: (v[0], v[1]) for k, v in bounds.items()}


def copyable_configs(admin: AdminClient, topic: str, timeout: float = 15.0) -> dict[str, str]:
    """The topic-level overrides set on `topic`, less the cluster-local ones."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout=timeout)
    return {
        name: entry.value
        for name, entry in entries.items()
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        and name not in CLUSTER_LOCAL_CONFIGS
        and entry.value is not None
    }


@dataclass
class TopicSync:
    """Mirrors topic existence, partition counts and configs from source to destination."""

    source: AdminClient
    destination: AdminClient
    topic_filter: TopicFilter
    renamer: TopicRenamer
    sync_configs: bool = True
    config_interval_s: float = 30.0
    log: Callable[[str], None] = print
    _last_config_sync: float = field(default=0.0, init=False)
    _warned_more_partitions: set[str] = field(default_factory=set, init=False)

    def sync(self) -> dict[str, int]:
        """One pass; returns the replicated source topics with their partition counts."""
        source = {t: n for t, n in partition_counts(self.source).items() if self.topic_filter.matches(t)}
        destination = partition_counts(self.destination)
        follow_configs = self.sync_configs and time.monotonic() - self._last_config_sync >= self.config_interval_s
        for topic, partitions in sorted(source.items()):
            remote = self.renamer.format_remote_topic(topic)
            if remote not in destination:
                self._create(topic, remote, partitions)
            elif destination[remote] < partitions:
                self._add_partitions(remote, destination[remote], partitions)
            elif destination[remote] > partitions and remote not in self._warned_more_partitions:
                self._warned_more_partitions.add(remote)
                self.log(f"topic {remote}: destination has {destination[remote]} partitions, source "
                         f"{topic} has {partitions}; the extra ones receive nothing from this flow")
            elif follow_configs:
                self._follow_configs(topic, remote)
        if follow_configs:
            self._last_config_sync = time.monotonic()
        return source

    def _create(self, topic: str, remote: str, partitions: int) -> None:
        configs = copyable_configs(self.source, topic) if self.sync_configs else {}
        # replication_factor=-1: the destination's default.replication.factor, since its
        # broker count need not match the source's.
        new = NewTopic(remote, num_partitions=partitions, replication_factor=-1, config=configs)
        future = self.destination.create_topics([new], request_timeout=30)[remote]
        try:
            future.result(timeout=30)
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
            return
        shown = ", ".join(f"{k}={v}" for k, v in sorted(configs.items())) or "broker defaults"
        self.log(f"topic {remote}: created with {partitions} partitions ({shown})")

    def _add_partitions(self, remote: str, current: int, partitions: int) -> None:
        self.destination.create_partitions([NewPartitions(remote, partitions)])[remote].result(timeout=30)
        self.log(f"topic {remote}: partitions {current} -> {partitions}, following the source")

    def _follow_configs(self, topic: str, remote: str) -> None:
        wanted = copyable_configs(self.source, topic)
        have = copyable_configs(self.destination, remote)
        changed = {k: v for k, v in wanted.items() if have.get(k) != v}
        if not changed:
            return
        resource = ConfigResource(
            ResourceType.TOPIC, remote,
            incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in changed.items()
            ],
        )
        self.destination.incremental_alter_configs([resource])[resource].result(timeout=30)
        shown = ", ".join(f"{k}={v}" for k, v in sorted(changed.items()))
        self.log(f"topic {remote}: configs updated from source ({shown})")
