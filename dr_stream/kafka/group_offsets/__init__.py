"""Groups' states and committed offsets on one cluster: one face, three client stacks.

Every caller holds a `GroupOffsetsClient` and takes the same path whichever stack serves it;
the answers are the same values (`answers`: `Committed`, `Fetched`, a group's state). Which stack
serves what, and why:

* **The flow's Java admin**, in the driver's JVM through py4j (`java_admin.GroupOffsets`): the
  running flow (the poller's admin path, the group sync). One request per coordinator for all
  the groups it holds (OffsetFetch v8), coordinator moves ridden out: a round costs about the
  same at 5 or 5,000 groups.
* **librdkafka**, a consumer per group that never joins (`consumer_groups.ConsumerGroupOffsets`;
  also listing, states, deletion): the commands (`status`, `translate`, `failover`, `failback`,
  `drill`, `reset-offsets`), which answer in about a second and start no Spark. A consumer, not the
  admin API, which crashes the process when a coordinator moves (librdkafka issue 5040). A
  command's round of many groups (`consumer_groups.BATCHED_FROM`) goes to the Kafka 4 helper below,
  which runs the flow's batched Java client (`kafka4.BatchedConsumerGroups`).
* **Kafka 4's Java admin in a helper JVM** (`kafka4.ShareGroupOffsets`,
  `kafka4.StreamsGroupStates`; the helper is jvm/kafka4/): share groups (KIP-932) and Streams
  groups (KIP-1071). Only Kafka 4's client has their APIs, and Spark's classpath carries the 3.9
  client, so the helper runs on Kafka 4's jars alone.

Where positions come from on the source (the `__consumer_offsets` topic or the admin path) is
`positions.committed_positions`; when a destination group may be written is
`positions.group_sync`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from dr_stream.kafka.group_offsets.answers import (
    INACTIVE_STATES,
    Committed,
    Fetched,
    GroupOffsetsError,
    Partition,
    commit_lines,
    committed_of,
    group_state,
    parse_committed,
    parse_states,
    states_of,
)

__all__ = ["INACTIVE_STATES", "Committed", "Fetched", "GroupOffsetsClient", "GroupOffsetsError", "Partition",
           "commit_lines", "committed_of", "group_state", "parse_committed", "parse_states", "states_of"]


class GroupOffsetsClient(Protocol):
    """What reads and writes groups' states and committed offsets on one cluster, whichever client
    stack serves it: `java_admin.GroupOffsets` (the flow's Java admin, batched), `consumer_groups.ConsumerGroupOffsets`
    (librdkafka, for commands without a JVM), `kafka4.ShareGroupOffsets` (share groups)."""

    def states(self, groups: list[str]) -> dict[str, tuple[str, int] | Exception]: ...

    def committed(self, groups: list[str], partitions: Iterable[Partition] | None = None) -> dict[str, Fetched]: ...

    def commit(self, offsets: Mapping[str, Mapping[Partition, int]], metadata: str) -> dict[str, Exception]: ...

    def expect(self, groups: int) -> None:
        """A round of `groups` groups is coming: a stack that serves many groups through a helper
        starts it now, while the caller lists what the round reads; the others ignore it."""

    def close(self) -> None: ...
