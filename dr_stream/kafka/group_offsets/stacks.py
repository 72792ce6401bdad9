"""Which client stack serves a caller's groups: chosen here, and nowhere else.

A caller with a JVM at hand (a flow's driver) asks for `batched` and gets the Java admin in that
JVM (`java_admin.GroupOffsets`: one request per coordinator whatever the number of groups); a
command without one gets librdkafka (`consumer_groups.ConsumerGroupOffsets`, which hands a round
of many groups to the Kafka 4 helper itself). Either is a `GroupOffsetsClient`, and the caller
closes it.
"""

from __future__ import annotations

from dr_stream.core.config import ClusterConfig
from dr_stream.kafka import clients
from dr_stream.kafka.group_offsets import GroupOffsetsClient
from dr_stream.kafka.group_offsets.consumer_groups import ConsumerGroupOffsets


def group_offsets_stack(cluster: ClusterConfig, timeout_s: float = 15.0, batched: bool = False) -> GroupOffsetsClient:
    return clients.group_offsets(cluster, timeout_s) if batched else ConsumerGroupOffsets(cluster, timeout_s)
