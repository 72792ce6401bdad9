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

`parse_committed` and `commit_lines` are the text format's two sides (pure, unit-tested).

Invariant: a group whose fetch or commit failed maps to its error, never to "no offsets"; an
authorizer's refusal becomes the one `NotAuthorized` line naming cluster, group and grant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar, cast

from dr_stream.core.config import ClusterConfig
from dr_stream.core.contracts import synced_from
from dr_stream.kafka.authorization import not_authorized

Partition = tuple[str, int]
T = TypeVar("T")
# Offsets dr-stream commits carry this metadata, so the flow running the other way can tell a
# translated position from a consumer's own progress and never echoes it back.


@dataclass(frozen=True)
class Committed:
    offset: int
    metadata: str = ""

    @property
    def written_by_dr_stream(self) -> bool:
        return synced_from(self.metadata) is not None

    def taken_by(self, forward_except: str | None) -> bool:
        """Whether a flow takes this position to translate. A consumer's own commit, always. One
        dr-stream synced here, only where the flow forwards (`forward_except` is its
        destination's cluster.id, else None) and it came from elsewhere than that destination,
        as far as its metadata says: a chain hop passes it on, a position never goes back to the
        cluster it came from."""
        origin = synced_from(self.metadata)
        return origin is None or (forward_except is not None and origin not in ("", forward_except))


# What one group's fetch gave: its offsets, or why there are none.
Fetched = dict[Partition, Committed] | Exception


class GroupOffsetsError(RuntimeError):
    """A group's fetch or commit failed; the message is the Java client's."""


def lines(text: str) -> list[list[str]]:
    """A helper's answer, one list of tab-separated fields per line."""
    return [line.split("\t") for line in text.splitlines()]


def parse_committed(text: str, groups: list[str]) -> dict[str, Fetched]:
    """`GroupOffsets.committed`'s lines -> per asked group, its offsets or its error (a group
    with no committed offsets maps to an empty dict)."""
    return committed_of(lines(text), groups)


def committed_of(rows: Iterable[list[str]], groups: Iterable[str]) -> dict[str, Fetched]:
    """`parse_committed` over lines already split: `group topic partition offset metadata`, or
    `group ! error`."""
    out: dict[str, Fetched] = {g: {} for g in groups}
    for fields in rows:
        group = fields[0]
        if len(fields) == 3 and fields[1] == "!":
            out[group] = GroupOffsetsError(fields[2])
        elif len(fields) == 5:
            committed = out.setdefault(group, {})
            if not isinstance(committed, Exception):
                committed[(fields[1], int(fields[2]))] = Committed(int(fields[3]), fields[4])
    return out


def group_state(state: str, members: int) -> tuple[str, int]:
    """(state, member count) as dr-stream names it: a coordinator describes a group it does not
    know as DEAD with no members, which is a group that is absent."""
    return ("ABSENT", 0) if state == "DEAD" and not members else (state, members)


def parse_states(text: str, groups: list[str]) -> dict[str, tuple[str, int] | Exception]:
    """`GroupOffsets.states`'s lines -> per asked group, its (state, members) or the error that
    kept it from being described (a group not answered for at all maps to an error too)."""
    return states_of(lines(text), groups)


def states_of(rows: Iterable[list[str]], groups: Iterable[str]) -> dict[str, tuple[str, int] | Exception]:
    """`parse_states` over lines already split: `group state members`, or `group ! error`."""
    out: dict[str, tuple[str, int] | Exception] = {
        g: GroupOffsetsError(f"group {g}: not described") for g in groups}
    for fields in rows:
        if len(fields) != 3:
            continue
        group, state, members = fields
        if state != "!":
            out[group] = group_state(state, int(members))
        elif "GroupIdNotFoundException" in members:
            out[group] = ("ABSENT", 0)
        else:
            out[group] = GroupOffsetsError(members)
    return out


def commit_lines(offsets: Mapping[str, Mapping[Partition, int]]) -> str:
    """{group: {(topic, partition): offset}} -> the lines `GroupOffsets.commit` takes."""
    return "".join(f"{group}\t{topic}\t{partition}\t{offset}\n" for group, wanted in sorted(offsets.items())
                   for (topic, partition), offset in sorted(wanted.items()))


def _denied(message: str) -> bool:
    return "AuthorizationException" in message


class GroupOffsetsClient(Protocol):
    """What reads and writes groups' states and committed offsets on one cluster, whichever client
    stack serves it: `GroupOffsets` (the flow's Java admin, batched), `groups.ConsumerGroupOffsets`
    (librdkafka, for commands without a JVM), `kafka4_groups.ShareGroupOffsets` (share groups)."""

    def states(self, groups: list[str]) -> dict[str, tuple[str, int] | Exception]: ...

    def committed(self, groups: list[str], partitions: Iterable[Partition] | None = None) -> dict[str, Fetched]: ...

    def commit(self, offsets: Mapping[str, Mapping[Partition, int]], metadata: str) -> dict[str, Exception]: ...

    def close(self) -> None: ...


class GroupOffsets:
    """A Java admin client for one cluster, built by `dr_stream.kafka.clients.group_offsets`."""

    def __init__(self, cluster: ClusterConfig, java_client, timeout_s: float = 15.0) -> None:
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
        `partitions` (which `groups.ConsumerGroupOffsets` needs, and this fetch does not)."""
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
        """Each group the authorizer refused DESCRIBE gets the one line naming cluster, group and grant."""
        for group, result in found.items():
            if isinstance(result, GroupOffsetsError) and _denied(str(result)):
                found[group] = cast(T, not_authorized(self.cluster.alias, self.cluster.kafka, "DESCRIBE",
                                                      f"GROUP {group}", doing))
        return found

    def commit(self, offsets: Mapping[str, Mapping[Partition, int]], metadata: str) -> dict[str, Exception]:
        """Commits every group's offsets with `metadata`; the groups that failed, with why. The
        broker refuses a commit to a group with members, which is when dr-stream must not write."""
        if not offsets:
            return {}
        failed: dict[str, Exception] = {}
        for line in self._client.commit(commit_lines(offsets), metadata, self._timeout_ms).splitlines():
            group, _, message = line.partition("\t")
            failed[group] = (not_authorized(self.cluster.alias, self.cluster.kafka, "READ", f"GROUP {group}",
                                            "committing offsets to it")
                             if _denied(message) else GroupOffsetsError(message))
        return failed

    def close(self) -> None:
        self._client.close()
