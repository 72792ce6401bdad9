"""Many consumer groups' committed offsets, read and written a round at a time.

A flow's control loops touch every selected group each round: the poller reads thousands of
source groups' commits, the group sync writes translated positions to as many destination
groups. One request per group (librdkafka's admin API takes a single group, and a consumer per
group costs a connection and a coordinator look-up each) makes a round grow with the group
count. `GroupOffsets` uses Apache Kafka's Java admin client in the driver's JVM instead: it
finds every group's coordinator in one request and fetches all groups a coordinator holds in
one more (OffsetFetch v8), and it rides out a coordinator that moves. Commits go out all at
once, one request per group in flight together. Values cross the gateway as text, so a round
is one call however many groups it covers.

The text format's two sides, `parse_committed` and `commit_lines`, are in `answers` (pure).

Invariant: a group whose fetch or commit failed maps to its error, never to "no offsets"; an
authorizer's refusal becomes the one `NotAuthorized` line naming cluster, group and grant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from dr_stream.core.config import ClusterConfig
from dr_stream.kafka.authorization import not_authorized
from dr_stream.kafka.group_offsets.answers import (
    Fetched,
    GroupOffsetsError,
    Partition,
    commit_lines,
    parse_committed,
    parse_states,
)

T = TypeVar("T")


def _denied(message: str) -> bool:
    return "AuthorizationException" in message


def refusals_named(cluster: ClusterConfig, found: dict[str, T], doing: str) -> dict[str, T]:
    """Each group the authorizer refused DESCRIBE gets the one line naming cluster, group and grant."""
    for group, result in found.items():
        if isinstance(result, GroupOffsetsError) and _denied(str(result)):
            found[group] = cast(T, not_authorized(cluster.alias, cluster.kafka, "DESCRIBE", f"GROUP {group}", doing))
    return found


def commit_failures(cluster: ClusterConfig, failed: Iterable[tuple[str, str]]) -> dict[str, Exception]:
    """(group, the Java client's error) per group whose commit failed -> its error, a refusal by
    the authorizer as the one line naming cluster, group and grant."""
    return {group: (not_authorized(cluster.alias, cluster.kafka, "READ", f"GROUP {group}", "committing offsets to it")
                    if _denied(message) else GroupOffsetsError(message))
            for group, message in failed}


class GroupOffsets:
    """A Java admin client for one cluster, built by `dr_stream.kafka.clients.group_offsets`."""

    def __init__(self, cluster: ClusterConfig, java_client: Any, timeout_s: float = 15.0) -> None:
        self.cluster = cluster
        self._client = java_client
        self._timeout_ms = int(timeout_s * 1000)

    def list_groups(self) -> list[str]:
        return sorted(self._client.listGroups(self._timeout_ms).splitlines())

    def states(self, groups: list[str]) -> dict[str, tuple[str, int] | Exception]:
        """Each group's (state, members), all groups a coordinator holds in one request."""
        if not groups:
            return {}
        return self._refused_named(parse_states(self._client.states("\n".join(groups), self._timeout_ms), groups),
                                   "describing it")

    def committed(self, groups: list[str], partitions: Iterable[Partition] | None = None) -> dict[str, Fetched]:
        """Each group's committed offsets, in one round: all its partitions, a superset of
        `partitions` (which `consumer_groups.ConsumerGroupOffsets` needs, and this fetch does not)."""
        return self._fetched(self._client.committed, groups)

    def committed_changes(self, groups: list[str]) -> dict[str, Fetched]:
        """`committed`, less each offset that is as this client's previous call of this method
        returned it (a group whose fetch failed is always there, with its error)."""
        return self._fetched(self._client.committedChanges, groups)

    def _fetched(self, fetch: Callable[[str, int], str], groups: list[str]) -> dict[str, Fetched]:
        if not groups:
            return {}
        return self._refused_named(parse_committed(fetch("\n".join(groups), self._timeout_ms), groups),
                                   "reading its committed offsets")

    def _refused_named(self, found: dict[str, T], doing: str) -> dict[str, T]:
        return refusals_named(self.cluster, found, doing)

    def commit(self, offsets: Mapping[str, Mapping[Partition, int]], metadata: str) -> dict[str, Exception]:
        """Commits every group's offsets with `metadata`; the groups that failed, with why. The
        broker refuses a commit to a group with members, which is when dr-stream must not write."""
        if not offsets:
            return {}
        answer = self._client.commit(commit_lines(offsets), metadata, self._timeout_ms)
        return commit_failures(self.cluster, (line.partition("\t")[::2] for line in answer.splitlines()))

    def expect(self, groups: int) -> None:
        """Nothing to start: one request per coordinator serves any number of groups."""

    def close(self) -> None:
        self._client.close()
