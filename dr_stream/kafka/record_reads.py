"""Single records read by their offsets, for the checks that compare a source with its copy.

Invariant: a read never waits past its timeout and never fails the caller: a record not read
(gone, a cluster away) is simply absent from the answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import TopicPartition

from dr_stream.core.config import ClusterConfig
from dr_stream.kafka import clients
from dr_stream.kafka.consumed import headers, offset, producer_time, same_producer_time, topic_partition

Partition = tuple[str, int]


@dataclass(frozen=True)
class ReadRecord:
    key: bytes | None
    value: bytes | None
    size: int  # key, value and headers in bytes
    producer_time: int | None  # the timestamp when it is the producer's (`consumed.producer_time`)

    def same_as(self, other: ReadRecord) -> bool:
        """Whether two reads are of the same record: a copy keeps key, value and the producer's
        time (a destination topic that stamps append time gives the copy a time of its own)."""
        return (self.key, self.value) == (other.key, other.value) and \
            same_producer_time(self.producer_time, other.producer_time)


def read_records(cluster: ClusterConfig, at: dict[Partition, int],
                 timeout_s: float = 5.0) -> dict[Partition, ReadRecord]:
    """The record at each partition's offset, in one consumer: a partition fetches a little, since
    only its first record is wanted."""
    if not at:
        return {}
    out: dict[Partition, ReadRecord] = {}
    settings = {"enable.auto.commit": False, "max.partition.fetch.bytes": 1024, "enable.partition.eof": True}
    try:
        with clients.consuming(cluster, "dr-stream-record-reads", settings) as consumer:
            consumer.assign([TopicPartition(t, p, o) for (t, p), o in at.items()])
            deadline = time.monotonic() + timeout_s
            while len(out) < len(at) and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=500, timeout=0.5):
                    if msg.error():
                        continue
                    key = topic_partition(msg)
                    if key in out or offset(msg) != at.get(key):
                        continue
                    out[key] = ReadRecord(msg.key(), msg.value(),
                                          len(msg.key() or b"") + len(msg.value() or b"")
                                          + sum(len(k.encode()) + len(v or b"") for k, v in headers(msg)),
                                          producer_time(msg))
    except Exception:  # a check that cannot read says nothing; the caller goes on without it
        return out
    return out
