"""Returned records: records on a flow's source that are copies of destination records.

After a failover the cluster that took over (the failback flow's source) holds copies of the
records that originated on the cluster coming back (its destination). Each copy names its
original in a provenance entry: cluster = the destination's cluster.id, topic, partition and
offset there. So a consumer positioned among those copies maps back exactly, without any
index: the original of the record it would read next is where it resumes.

Invariant: a counterpart is only taken from a provenance entry naming the destination cluster,
the destination topic and partition; anything else (local records, malformed headers) is None.
"""

from __future__ import annotations

from confluent_kafka import TopicPartition

from dr_stream.config import ClusterConfig, FlowConfig
from dr_stream.kafka import clients
from dr_stream.provenance import entries, origin_offset


def maps_back(config: FlowConfig) -> bool:
    """Whether copies of destination records on the source translate to their originals. Not for
    a flow with filter overrides: it copies destination records back (a full restore), so the
    originals' offsets may be gone."""
    return not config.provenance.filter_overrides


class ReturnedRecords:
    """Looks up, on the source, the destination original of the record at an offset (its consumer
    is opened at the first look-up and closed by `close`)."""

    def __init__(self, source: ClusterConfig, header: str, destination_cluster_id: str) -> None:
        self.source = source
        self.header = header
        self.destination_cluster_id = destination_cluster_id
        # A look-up at the end of a partition must not wait out the broker's default 500 ms fetch wait.
        self._consumer = clients.OnDemandConsumer(source, "dr-stream-returned", {
            "enable.partition.eof": True, "isolation.level": "read_committed", "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 10,
        })
        # A record never changes once written: what it says is kept (not the end of a log, which moves).
        self._known: dict[tuple[str, int, int, str], int | None] = {}

    def original_at(self, topic: str, partition: int, offset: int, dest_topic: str,
                    timeout: float = 5.0) -> int | None:
        """Destination offset of the original of the first source record at or after `offset`,
        when that record is a returned copy; None for a local record or the end of the log."""
        if offset < 0:
            return None
        key = (topic, partition, offset, dest_topic)
        if key in self._known:
            return self._known[key]
        consumer = self._consumer.get()
        consumer.assign([TopicPartition(topic, partition, offset)])
        try:
            for msg in consumer.consume(num_messages=1, timeout=timeout):
                if msg.error() is not None:
                    return None  # end of the partition
                found = (origin_offset(e, self.destination_cluster_id, dest_topic, partition)
                         for e in entries(msg.headers(), self.header))
                original = next((o for o in found if o is not None), None)
                if msg.offset() == offset:
                    if len(self._known) > 100_000:
                        self._known.clear()
                    self._known[key] = original
                return original
            return None
        finally:
            consumer.unassign()

    def close(self) -> None:
        self._consumer.close()
