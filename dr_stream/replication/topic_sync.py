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

from dr_stream.core.config import ClusterConfig
from dr_stream.core.policy import TopicFilter, TopicRenamer
from dr_stream.kafka.admin import copyable_configs_of, create_topics, partition_counts
from dr_stream.kafka.authorization import NotAuthorized, denied, not_authorized

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
    # source topic -> its own max.message.bytes, as last read (topics at the broker's default are absent)
    _message_bytes: dict[str, int] = field(default_factory=dict, init=False)

    @property
    def largest_message_bytes(self) -> int:
        """The largest `max.message.bytes` a replicated source topic sets itself (0: none does);
        the destination topic gets the same, so the sink's requests must allow it."""
        return max(self._message_bytes.values(), default=0)

    def _note_limits(self, topic: str, configs: dict[str, str]) -> None:
        if "max.message.bytes" in configs:
            self._message_bytes[topic] = int(configs["max.message.bytes"])
        else:
            self._message_bytes.pop(topic, None)

    def sync(self) -> dict[str, int]:
        """One pass; returns the replicated source topics with their partition counts.

        A pass costs the same few requests at any topic count: a listing of each cluster, then
        one request each for the configs of the new topics, their creation, the partition
        increases, and (every `config_interval_s`) the configs of both sides and their changes."""
        source = {t: n for t, n in partition_counts(self.source).items() if self.topic_filter.matches(t)}
        destination = partition_counts(self.destination)
        follow_configs = self.sync_configs and time.monotonic() - self._last_config_sync >= self.config_interval_s
        new, grown, followed = {}, {}, {}
        for topic, partitions in sorted(source.items()):
            remote = self.renamer.format_remote_topic(topic)
            if remote not in destination:
                new[topic] = (remote, partitions)
            elif destination[remote] < partitions:
                grown[remote] = (destination[remote], partitions)
            elif destination[remote] > partitions and remote not in self._warned_more_partitions:
                self._warned_more_partitions.add(remote)
                self.log(f"topic {remote}: destination has {destination[remote]} partitions, source "
                         f"{topic} has {partitions}; the extra ones receive nothing from this flow")
            elif follow_configs and topic not in self._configs_denied:
                followed[topic] = remote
        self._create(new)
        self._add_partitions(grown)
        if followed:
            self._follow_configs(followed)
        if follow_configs:
            self._last_config_sync = time.monotonic()
        return source

    def _create(self, new: dict[str, tuple[str, int]]) -> None:
        if not new:
            return
        configs = copyable_configs_of(self.source, sorted(new)) if self.sync_configs else {}
        unread = [found for found in configs.values() if isinstance(found, Exception)]
        if unread:  # no topic is created without the source's configs: the next pass tries again
            raise unread[0]
        read = {topic: found for topic, found in configs.items() if not isinstance(found, Exception)}
        for topic, found in read.items():
            self._note_limits(topic, found)
        wanted = {remote: (partitions, read.get(topic, {})) for topic, (remote, partitions) in new.items()}
        failed = []
        for remote, created in sorted(create_topics(self.destination, wanted).items()):
            if isinstance(created, Exception):
                failed.append(created)
            elif created:
                partitions, copied = wanted[remote]
                shown = ", ".join(f"{k}={v}" for k, v in sorted(copied.items())) or "broker defaults"
                self.log(f"topic {remote}: created with {partitions} partitions ({shown})")
        if failed:  # the others are created: the next pass tries these again
            raise failed[0]

    def _add_partitions(self, grown: dict[str, tuple[int, int]]) -> None:
        if not grown:
            return
        futures = self.destination.create_partitions([NewPartitions(r, n) for r, (_, n) in sorted(grown.items())])
        failed = []
        for remote, (current, partitions) in sorted(grown.items()):
            try:
                futures[remote].result(timeout=30)
                self.log(f"topic {remote}: partitions {current} -> {partitions}, following the source")
            except KafkaException as exc:
                failed.append(exc)
        if failed:
            raise failed[0]

    def _follow_configs(self, followed: dict[str, str]) -> None:
        """Copies changed configs of `followed` (source topic -> remote); a topic whose configs
        the authorizer keeps from this flow is said once and not followed from then on."""
        wanted = copyable_configs_of(self.source, sorted(followed))
        have = copyable_configs_of(self.destination, sorted(followed.values()))
        changes: dict[str, dict[str, str]] = {}
        for topic, remote in sorted(followed.items()):
            try:
                theirs = _allowed(self.source_cluster, "DESCRIBE_CONFIGS", topic, wanted[topic])
                ours = _allowed(self.destination_cluster, "DESCRIBE_CONFIGS", remote, have[remote])
            except NotAuthorized as exc:
                self._deny(topic, remote, exc)
                continue
            self._note_limits(topic, theirs)
            changed = {k: v for k, v in theirs.items() if ours.get(k) != v}
            if changed:
                changes[remote] = changed
        if not changes:
            return
        resources = {remote: ConfigResource(ResourceType.TOPIC, remote, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in changed.items()])
            for remote, changed in changes.items()}
        futures = self.destination.incremental_alter_configs(list(resources.values()))
        by_remote = {remote: topic for topic, remote in followed.items()}
        for remote, resource in resources.items():
            try:
                _allowed(self.destination_cluster, "ALTER_CONFIGS", remote, futures[resource].result(timeout=30))
            except NotAuthorized as exc:
                self._deny(by_remote[remote], remote, exc)
                continue
            shown = ", ".join(f"{k}={v}" for k, v in sorted(changes[remote].items()))
            self.log(f"topic {remote}: configs updated from source ({shown})")

    def _deny(self, topic: str, remote: str, exc: NotAuthorized) -> None:
        self._configs_denied.add(topic)
        self.log(f"topic {remote}: configs not followed from now on: {exc}")


def _allowed(cluster: ClusterConfig, operation: str, topic: str, found: T | Exception) -> T:
    """A per-topic answer, with the authorizer's no turned into the one NotAuthorized line."""
    if isinstance(found, KafkaException) and denied(found):
        raise not_authorized(cluster.alias, cluster.kafka, operation, f"TOPIC {topic}", "following topic configs")
    if isinstance(found, Exception):
        raise found
    return found
