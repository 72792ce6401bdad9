"""Group positions read where the brokers keep them: the internal topic `__consumer_offsets`.

Every offset commit of every group is a record there, written by the group's coordinator. A
reader that follows the topic learns of each commit once, when it happens, so a round costs
what was committed since the last one, not what the cluster holds: at thousands of idle groups
a round reads nothing. Asking each coordinator for every group's offsets (`group_offsets`, the
admin path) costs a full fetch per round instead, and needs DESCRIBE on the groups; this needs
READ (and DESCRIBE) on `TOPIC __consumer_offsets` and nothing on the groups.

The records, as the group coordinator writes them (each a version-prefixed binary struct):

* key version 0 or 1: an offset commit, `group (string) topic (string) partition (int32)`;
  any other key version is group metadata or a newer coordinator's own state: skipped;
* value of an offset commit: `offset (int64)`, from version 3 `leader epoch (int32)`, then
  `metadata (string)`, `commit timestamp (int64)` (version 1 adds an expiry); version 4 is
  the first flexible version: its metadata is a compact string and tagged fields follow;
* no value: the offset was deleted (group deleted, offsets expired).

`decode_offset_commit` is that rule, pure and unit-tested; `ConsumerOffsetsTopic` is the I/O
around it. Transactional commits count only once their transaction commits (read_committed).

Invariants: the newest record per group and partition is its position; a record that does not
decode is counted, never fatal; a refused READ is one `NotAuthorized` line naming the grant.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from dr_stream.core.config import ClusterConfig
from dr_stream.kafka import clients
from dr_stream.kafka.authorization import not_authorized
from dr_stream.kafka.consumed import topic_partition
from dr_stream.kafka.group_offsets import Committed, Partition

TOPIC = "__consumer_offsets"
# Newest offset-commit value layout this reader knows; newer ones are counted as undecodable.
NEWEST_VALUE_VERSION = 4
_DENIED = {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED}


class Undecodable(ValueError):
    """A record of `__consumer_offsets` that is neither an offset commit nor a known other kind."""


@dataclass(frozen=True)
class OffsetCommitRecord:
    group: str
    topic: str
    partition: int
    # None: the offset was deleted
    committed: Committed | None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> int:
        try:
            (value,) = struct.unpack_from(fmt, self.data, self.at)
        except struct.error:
            raise Undecodable(f"record ends inside a field at byte {self.at}") from None
        self.at += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str:
        length = self.take(">h")
        return "" if length < 0 else self._text(length)

    def compact_string(self) -> str:
        length = self.uvarint() - 1
        return "" if length < 0 else self._text(length)

    def uvarint(self) -> int:
        value, shift = 0, 0
        while True:
            byte = self.take(">B")
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise Undecodable("varint longer than 5 bytes")

    def _text(self, length: int) -> str:
        if self.at + length > len(self.data):
            raise Undecodable(f"string of {length} bytes runs past the record's end")
        text = self.data[self.at:self.at + length].decode("utf-8", errors="replace")
        self.at += length
        return text


def decode_commit_key(key: bytes | None) -> tuple[str, str, int] | None:
    """An offset commit's key -> (group, topic, partition), or None for another kind of record.
    Raises Undecodable for a key it cannot read."""
    if not key:
        raise Undecodable("record without a key")
    k = _Reader(key)
    if k.take(">h") not in (0, 1):
        return None
    return k.string(), k.string(), k.take(">i")


def decode_offset_commit(key: bytes | None, value: bytes | None) -> OffsetCommitRecord | None:
    """One `__consumer_offsets` record -> the offset commit it holds, or None for group metadata
    and other coordinator records. Raises Undecodable for a record it cannot read."""
    where = decode_commit_key(key)
    if where is None:
        return None
    group, topic, partition = where
    if value is None:
        return OffsetCommitRecord(group, topic, partition, None)
    v = _Reader(value)
    version = v.take(">h")
    if not 0 <= version <= NEWEST_VALUE_VERSION:
        raise Undecodable(f"offset commit value version {version} (this reader knows 0 to {NEWEST_VALUE_VERSION})")
    offset = v.take(">q")
    if version >= 3:
        v.take(">i")  # leader epoch
    metadata = v.compact_string() if version >= 4 else v.string()
    v.take(">q")  # commit timestamp: the broker's clock at the commit, not the consumed record's
    return OffsetCommitRecord(group, topic, partition, Committed(offset, metadata))


Positions = dict[str, dict[Partition, Committed]]


class ConsumerOffsetsTopic:
    """A reader of `__consumer_offsets` that keeps the newest position per group and partition.

    `catch_up` reads what was committed since its last call and returns those positions; the
    first call reads the topic from its start. Compaction leaves the topic's newest segments
    whole, so that start holds hours of every group's older commits, in order: until every
    partition has been read to its end once, what was read is history, and a group's newest
    commit may still be ahead. So the rounds before that return nothing and the first round that
    reaches it returns every position then held: a reader never reports a position older than
    one it passed on, which would move a group back (and hold its partitions' spans back) for
    as long as the catch-up takes. The consumer assigns partitions and never joins or commits
    to a group.
    """

    def __init__(self, cluster: ClusterConfig, on_undecodable: Callable[[int, str], None] = lambda n, why: None,
                 round_limit_s: float = 5.0) -> None:
        self.cluster = cluster
        self.positions: Positions = {}
        self.undecodable = 0
        # groups with a commit whose value did not decode (their positions may be missing), and
        # whether a key did not (then any group's may be)
        self.undecodable_groups: set[str] = set()
        self.undecodable_key = False
        self._on_undecodable = on_undecodable
        self._round_limit_s = round_limit_s
        self._consumer = clients.consumer(cluster, "dr-stream-commit-reader", {
            "enable.partition.eof": True, "isolation.level": "read_committed",
            # a round ends at the log end; the long poll behind it must not hold the round up
            "fetch.wait.max.ms": 100})
        self._partitions: list[int] | None = None
        self._at_end: set[int] = set()
        # partitions read to their end at least once, and what was read before all of them were
        self._reached: set[int] = set()
        self._held_back: Positions | None = {}

    def _assign(self) -> None:
        topic = self._consumer.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
        if topic is None or (topic.error is not None and topic.error.code() in _DENIED):
            raise self._refused()
        if topic.error is not None and topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return  # no group has committed on this cluster yet: the brokers create it at the first
        if topic.error is not None:
            raise RuntimeError(f"{self.cluster.alias}: {TOPIC}: {topic.error.str()}")
        self._partitions = sorted(topic.partitions)
        self._consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in self._partitions])

    def _refused(self) -> Exception:
        return not_authorized(self.cluster.alias, self.cluster.kafka, "READ", f"TOPIC {TOPIC}",
                              "reading group positions where the brokers keep them")

    def catch_up(self) -> Positions:
        """The positions committed since the last call (each group and partition at its newest),
        read until every partition of the topic is at its end or the round limit passes."""
        if self._partitions is None:
            self._assign()
            if self._partitions is None:
                return {}
        changed: Positions = {} if self._held_back is None else self._held_back
        deadline = time.monotonic() + self._round_limit_s
        bad, why = 0, ""
        # A partition stays at its end until a record for it arrives (librdkafka says EOF once per
        # arrival there), so an idle round is one short consume.
        while True:
            batch = self._consumer.consume(num_messages=10_000, timeout=clients.CONSUME_WAIT_S)
            for msg in batch:
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        self._at_end.add(topic_partition(msg)[1])
                        self._reached.add(topic_partition(msg)[1])
                    elif error.code() in _DENIED:
                        raise self._refused()
                    elif not error.retriable():
                        raise RuntimeError(f"{self.cluster.alias}: reading {TOPIC}: {error.str()}")
                    continue
                self._at_end.discard(msg.partition())
                try:
                    record = decode_offset_commit(msg.key(), msg.value())
                except Undecodable as exc:
                    bad, why = bad + 1, f"partition {msg.partition()} offset {msg.offset()}: {exc}"
                    self._undecodable(msg.key())
                    continue
                if record is not None:
                    self._keep(record, changed)
            if (not batch and len(self._at_end) == len(self._partitions)) or time.monotonic() > deadline:
                break
        if bad:
            self.undecodable += bad
            self._on_undecodable(bad, why)
        if self._held_back is not None:
            if len(self._reached) < len(self._partitions):
                return {}
            self._held_back = None
        return changed

    @property
    def caught_up(self) -> bool:
        """Whether every partition of the topic has been read to its end once (before that,
        `catch_up` returns nothing and `positions` may hold commits older than a group's newest)."""
        return self._held_back is None

    @property
    def complete(self) -> bool:
        """Whether `positions` holds every committed offset up to where each partition of the
        topic ended at the last `catch_up` (a round cut short by its limit has not)."""
        return self._partitions is not None and self.caught_up and len(self._at_end) == len(self._partitions)

    def _undecodable(self, key: bytes | None) -> None:
        try:
            where = decode_commit_key(key)
        except Undecodable:
            self.undecodable_key = True
            return
        if where is not None:
            self.undecodable_groups.add(where[0])

    def _keep(self, record: OffsetCommitRecord, changed: Positions) -> None:
        where = (record.topic, record.partition)
        if record.committed is None:
            # A deleted offset: the group leaves the map with its last one (a deleted group,
            # a console consumer's) so the map holds what the brokers hold, not every group seen.
            held = self.positions.get(record.group)
            if held is not None:
                held.pop(where, None)
                if not held:
                    del self.positions[record.group]
            changed.get(record.group, {}).pop(where, None)
            return
        self.positions.setdefault(record.group, {})[where] = record.committed
        changed.setdefault(record.group, {})[where] = record.committed

    def close(self) -> None:
        self._consumer.close()
