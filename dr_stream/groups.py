"""Consumer groups on one cluster: who they are, where they stand, whether they are running."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

# Offsets dr-stream commits carry this metadata, so the flow running the other way can tell a
# translated position from a consumer's own progress and never echoes it back.
SYNC_METADATA_PREFIX = "dr-stream:"

# A group in one of these states has no members: offsets can be written without clobbering anyone.
INACTIVE_STATES = frozenset({"EMPTY", "DEAD", "ABSENT"})


@dataclass(frozen=True)
class Committed:
    offset: int
    metadata: str = ""

    @property
    def written_by_dr_stream(self) -> bool:
        return self.metadata.startswith(SYNC_METADATA_PREFIX)


def list_groups(admin: AdminClient, timeout: float = 15.0) -> list[str]:
    result = admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout)
    return sorted(g.group_id for g in result.valid)


def committed_offsets(admin: AdminClient, group: str, timeout: float = 15.0) -> dict[tuple[str, int], Committed]:
    request = [ConsumerGroupTopicPartitions(group)]
    try:
        result = admin.list_consumer_group_offsets(request, request_timeout=timeout)[group].result(timeout=timeout)
    except KafkaException as exc:
        if "GROUP_ID_NOT_FOUND" in str(exc):
            return {}
        raise
    return {
        (tp.topic, tp.partition): Committed(tp.offset, tp.metadata or "")
        for tp in result.topic_partitions or []
        if tp.offset >= 0 and tp.error is None
    }


def group_state(admin: AdminClient, group: str, timeout: float = 15.0) -> tuple[str, int]:
    """(state, member count); a group the cluster does not know is ("ABSENT", 0)."""
    try:
        described = admin.describe_consumer_groups([group], request_timeout=timeout)[group].result(timeout=timeout)
    except KafkaException as exc:
        if "GROUP_ID_NOT_FOUND" in str(exc):
            return "ABSENT", 0
        raise
    state = described.state.name if described.state is not None else "UNKNOWN"
    members = len(described.members or [])
    if state == "DEAD" and not members:
        return "ABSENT", 0
    return state, members


def commit_offsets(admin: AdminClient, group: str, offsets: dict[tuple[str, int], int], metadata: str,
                   timeout: float = 15.0) -> None:
    partitions = [TopicPartition(t, p, o, metadata=metadata) for (t, p), o in sorted(offsets.items())]
    request = [ConsumerGroupTopicPartitions(group, partitions)]
    result = admin.alter_consumer_group_offsets(request, request_timeout=timeout)[group].result(timeout=timeout)
    failed = [tp for tp in result.topic_partitions or [] if tp.error is not None]
    if failed:
        raise KafkaException(failed[0].error)
