"""Where the poller reads the source groups' committed offsets: two readers, one contract.

* `TopicPositions` follows `__consumer_offsets` (`kafka/consumer_offsets_topic`): a round reads
  the commits made since the last one, so its cost follows the commit rate, not the group
  count. It needs READ on `TOPIC __consumer_offsets`.
* `AdminPositions` asks the group coordinators (`kafka/group_offsets`, the Java admin client
  in the driver): the group listing, then one batched offset fetch per coordinator for every
  selected group, each round. It needs DESCRIBE on the groups.

`read(full)` answers {group: {(topic, partition): Committed} or the error that kept the group
from being read}. With `full` it holds every selected group's positions; without, at least
those that changed since the previous call (the caller compares with what it reported).

Invariant: only groups `groups` selects are returned; a group that could not be read maps to
its error, never to "no offsets".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from dr_stream.core.config import ClusterConfig
from dr_stream.core.policy import GroupFilter
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.kafka.consumer_offsets_topic import ConsumerOffsetsTopic
from dr_stream.kafka.group_offsets import Fetched
from dr_stream.kafka.group_offsets.java_admin import GroupOffsets


class CommittedPositions(Protocol):
    name: str

    def read(self, full: bool) -> tuple[int, dict[str, Fetched]]:
        """(how many selected groups there are, their positions as described above)."""
        ...

    def unread(self) -> frozenset[str] | None:
        """After a full `read`: the groups that exist but whose offsets it may lack (beyond those
        mapped to an error), or None when the read is no evidence of what the source holds."""
        ...

    def close(self) -> None: ...


class AdminPositions:
    name = "admin"

    def __init__(self, cluster: ClusterContext, groups: GroupFilter, offsets: GroupOffsets | None = None) -> None:
        # the driver's own Java admin client unless one is handed in (a bench's JVM)
        self._offsets = offsets or cluster.java_groups()
        self._groups = groups

    def read(self, full: bool) -> tuple[int, dict[str, Fetched]]:
        selected = [g for g in self._offsets.list_groups() if self._groups.matches(g)]
        # Only offsets that changed since the last fetch cross from the JVM, so an idle round at
        # thousands of groups parses nothing.
        fetch = self._offsets.committed if full else self._offsets.committed_changes
        return len(selected), fetch(selected)

    def unread(self) -> frozenset[str] | None:
        return frozenset()  # every listed group was fetched, or maps to its error

    def close(self) -> None:
        self._offsets.close()


class TopicPositions:
    name = "__consumer_offsets"

    def __init__(self, cluster: ClusterConfig, groups: GroupFilter,
                 on_undecodable: Callable[[int, str], None] = lambda n, why: None) -> None:
        self._topic = ConsumerOffsetsTopic(cluster, on_undecodable)
        self._groups = groups

    def read(self, full: bool) -> tuple[int, dict[str, Fetched]]:
        changed = self._topic.catch_up()
        # before the reader has caught up its positions are history, which a full read must not
        # pass on either (`unread` says the read is no evidence meanwhile)
        source = self._topic.positions if full and self._topic.caught_up else changed
        found: dict[str, Fetched] = {g: dict(p) for g, p in source.items() if self._groups.matches(g)}
        return sum(1 for g in self._topic.positions if self._groups.matches(g)), found

    def unread(self) -> frozenset[str] | None:
        topic = self._topic
        if not topic.complete or topic.undecodable_key:
            return None
        return frozenset(topic.undecodable_groups)

    def close(self) -> None:
        self._topic.close()
