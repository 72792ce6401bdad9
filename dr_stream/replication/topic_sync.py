"""Destination topics: created before the first write and kept in step with the source.

Invariants: a topic the flow will write to exists on the destination with at least the
source's partition count before its records are written; every creation, partition
increase and config change is reported on the flow's log. Following configs is a courtesy:
where the principal may not describe or alter them, that is said once per topic and the
records are copied all the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    ResourceType,
)

from dr_stream.config import ClusterConfig
from dr_stream.kafka.admin import copyable_configs, create_topic, partition_counts
from dr_stream.kafka.authorization import NotAuthorized, denied, not_authorized
from dr_stream.policy import TopicFilter, TopicRenamer

T = TypeVar("T")


@dataclass
class TopicSync:
    """Mirrors topic existence, partition counts and configs from source to destination."""

    source: AdminClient
    destination: AdminClient
    topic_filter: TopicFilter
    renamer: TopicRenamer
    source_cluster: ClusterConfig
    destination_cluster: ClusterConfig
    sync_configs: bool = True
    config_interval_s: float = 30.0
    log: Callable[[str], None] = print
    _last_config_sync: float = field(default=0.0, init=False)
    _warned_more_partitions: set[str] = field(default_factory=set, init=False)
    _configs_denied: set[str] = field(default_factory=set, init=False)

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
            elif follow_configs and topic not in self._configs_denied:
                self._follow_configs(topic, remote)
        if follow_configs:
            self._last_config_sync = time.monotonic()
        return source

    def _create(self, topic: str, remote: str, partitions: int) -> None:
        configs = copyable_configs(self.source, topic) if self.sync_configs else {}
        if create_topic(self.destination, remote, partitions, configs):
            shown = ", ".join(f"{k}={v}" for k, v in sorted(configs.items())) or "broker defaults"
            self.log(f"topic {remote}: created with {partitions} partitions ({shown})")

    def _add_partitions(self, remote: str, current: int, partitions: int) -> None:
        self.destination.create_partitions([NewPartitions(remote, partitions)])[remote].result(timeout=30)
        self.log(f"topic {remote}: partitions {current} -> {partitions}, following the source")

    def _follow_configs(self, topic: str, remote: str) -> None:
        try:
            self._copy_changed_configs(topic, remote)
        except NotAuthorized as exc:
            self._configs_denied.add(topic)
            self.log(f"topic {remote}: configs not followed from now on: {exc}")

    def _copy_changed_configs(self, topic: str, remote: str) -> None:
        wanted = _allowed(self.source_cluster, "DESCRIBE_CONFIGS", topic, lambda: copyable_configs(self.source, topic))
        have = _allowed(self.destination_cluster, "DESCRIBE_CONFIGS", remote,
                        lambda: copyable_configs(self.destination, remote))
        changed = {k: v for k, v in wanted.items() if have.get(k) != v}
        if not changed:
            return
        resource = ConfigResource(
            ResourceType.TOPIC, remote,
            incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in changed.items()
            ],
        )
        _allowed(self.destination_cluster, "ALTER_CONFIGS", remote,
                 lambda: self.destination.incremental_alter_configs([resource])[resource].result(timeout=30))
        shown = ", ".join(f"{k}={v}" for k, v in sorted(changed.items()))
        self.log(f"topic {remote}: configs updated from source ({shown})")


def _allowed(cluster: ClusterConfig, operation: str, topic: str, call: Callable[[], T]) -> T:
    """call(), with the authorizer's no turned into the one NotAuthorized line."""
    try:
        return call()
    except KafkaException as exc:
        if denied(exc):
            raise not_authorized(cluster.alias, cluster.kafka, operation, f"TOPIC {topic}",
                                 "following topic configs") from None
        raise
