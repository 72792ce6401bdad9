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

from confluent_kafka import Consumer, TopicPartition

from dr_stream.already_copied import origin_of


class ReturnedRecords:
    """Looks up, on the source, the destination original of the record at an offset."""

    def __init__(self, source: dict[str, str], header: str, destination_cluster_id: str) -> None:
        self.header = header
        self.destination_cluster_id = destination_cluster_id
        self._consumer = Consumer({
            **source, "group.id": "dr-stream-returned", "enable.auto.commit": False,
            "enable.partition.eof": True, "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        })

    def original_at(self, topic: str, partition: int, offset: int, dest_topic: str,
                    timeout: float = 5.0) -> int | None:
        """Destination offset of the original of the first source record at or after `offset`,
        when that record is a returned copy; None for a local record or the end of the log."""
        if offset < 0:
            return None
        self._consumer.assign([TopicPartition(topic, partition, offset)])
        try:
            for msg in self._consumer.consume(num_messages=1, timeout=timeout):
                if msg.error() is not None:
                    return None  # end of the partition
                return self._original(msg.headers(), dest_topic, partition)
            return None
        finally:
            self._consumer.unassign()

    def _original(self, headers, dest_topic: str, partition: int) -> int | None:
        for key, value in headers or []:
            if key != self.header:
                continue
            entry = origin_of([(key, value)], self.header)
            if (entry and entry.get("cluster") == self.destination_cluster_id and entry.get("topic") == dest_topic
                    and entry.get("partition") == partition and isinstance(entry.get("offset"), int)):
                return entry["offset"]
        return None

    def close(self) -> None:
        self._consumer.close()
