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

import time
from collections.abc import Iterable, Mapping

from confluent_kafka import Message, TopicPartition

from dr_stream.core.config import ClusterConfig, FlowConfig
from dr_stream.core.provenance import entries, origin_offset
from dr_stream.kafka import clients
from dr_stream.kafka.consumed import headers, place

LookUp = tuple[str, int, int, str]  # source topic, partition, offset; destination topic


def maps_back(config: FlowConfig) -> bool:
    """Whether copies of destination records on the source translate to their originals. Not for
    a flow with filter overrides: it copies destination records back (a full restore), so the
    originals' offsets may be gone."""
    return not config.provenance.filter_overrides


class ReturnedRecords:
    """Looks up, on the source, the destination original of the record at an offset (its consumer
    is opened at the first look-up and closed by `close`)."""

    def __init__(self, source: ClusterConfig, header: str, destination_cluster_id: str,
                 reader: clients.LentConsumer | None = None) -> None:
        """`reader`: a command's reader of the source (`cluster_context`), else one of its own."""
        self.source = source
        self.header = header
        self.destination_cluster_id = destination_cluster_id
        # A look-up at the end of a partition must not wait out the broker's default 500 ms fetch wait.
        self._consumer: clients.OnDemandConsumer | clients.LentConsumer = reader if reader is not None else \
            clients.OnDemandConsumer(source, "dr-stream-returned", {
                "enable.partition.eof": True, "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 10,
            })
        # A record never changes once written: what it says is kept (not the end of a log, which moves).
        self._known: dict[LookUp, int | None] = {}

    def originals(self, looks: Iterable[LookUp], ends: Mapping[tuple[str, int], int] | None = None,
                  timeout: float = 5.0) -> dict[LookUp, int | None]:
        """Per look-up, the destination offset of the original of the first source record at or
        after its offset, when that record is a returned copy; None for a local record or the end
        of the log. A round of thousands of positions costs a few fetches, not one each: a
        look-up at or past its partition's log end (`ends`, when known) is None without a read,
        since no record is there yet; the others are read in waves, each wave one offset of every
        partition that still has one, all at once."""
        out: dict[LookUp, int | None] = {}
        todo: dict[tuple[str, int], list[LookUp]] = {}
        for look in set(looks):
            topic, partition, offset, _ = look
            end = (ends or {}).get((topic, partition))
            if offset < 0 or (end is not None and offset >= end):
                out[look] = None
            elif look in self._known:
                out[look] = self._known[look]
            else:
                todo.setdefault((topic, partition), []).append(look)
        while todo:
            out.update(self._read({tp: looks.pop() for tp, looks in todo.items()}, timeout))
            todo = {tp: looks for tp, looks in todo.items() if looks}
        return out

    def _read(self, wave: dict[tuple[str, int], LookUp], timeout: float) -> dict[LookUp, int | None]:
        """The first record at or after each partition's offset, every partition of the wave at once;
        None at the end of a partition or when it did not answer within `timeout`."""
        consumer = self._consumer.get()
        consumer.assign([TopicPartition(t, p, look[2]) for (t, p), look in wave.items()])
        out: dict[LookUp, int | None] = {}
        deadline = time.monotonic() + timeout
        try:
            while len(out) < len(wave) and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=max(100, len(wave)), timeout=clients.CONSUME_WAIT_S):
                    where = place(msg)
                    look = None if where is None else wave.get(where)
                    if look is None or look in out:
                        continue  # a later record of a partition already answered
                    out[look] = None if msg.error() is not None else self._original(msg, look)
        finally:
            consumer.unassign()
        return {look: out.get(look) for look in wave.values()}

    def _original(self, msg: Message, look: LookUp) -> int | None:
        _, partition, offset, dest_topic = look
        found = (origin_offset(e, self.destination_cluster_id, dest_topic, partition)
                 for e in entries(headers(msg), self.header))
        original = next((o for o in found if o is not None), None)
        if msg.offset() == offset:
            if len(self._known) > 100_000:
                self._known.clear()
            self._known[look] = original
        return original

    def close(self) -> None:
        self._consumer.close()
