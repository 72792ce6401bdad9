"""Returned records: records on a flow's source that are copies of destination records.

After a failover the cluster that took over (the failback flow's source) holds copies of the
records that originated on the cluster coming back (its destination). Each copy names its
original in a provenance entry: cluster = the destination's cluster.id, topic, partition and
offset there. So a consumer positioned among those copies maps back exactly, without any
index: the original of the record it would read next is where it resumes.

A provenance entry is a claim: anyone who may write to the source topic can write any header,
and cluster ids are not secret. A forged entry would move a group's position on the destination
to wherever it points, and positions never move back. So a claim is taken only once the
destination confirms it: the record at the offset named holds the same key and value as the
copy (and, when both keep the producer's time, the same timestamp). A claim the destination
does not confirm (another record there, or none: retention took it) is no counterpart, and is
said and counted (`on_unconfirmed`).

Invariant: a counterpart is only taken from a provenance entry naming the destination cluster,
the destination topic and partition, and confirmed by the destination's record there; anything
else (local records, malformed headers, unconfirmed claims) is None.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, Message, TopicPartition

from dr_stream.core.config import FlowConfig
from dr_stream.core.provenance import entries, origin_offset
from dr_stream.kafka import clients
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.kafka.consumed import headers, offset, place, producer_time, same_producer_time

LookUp = tuple[str, int, int, str]  # source topic, partition, offset; destination topic


@dataclass(frozen=True)
class Likeness:
    """What a copy shares with its original: digests of its key and value, and its timestamp
    when it is the producer's (a topic that stamps the append time gives a copy its own)."""

    key: bytes
    value: bytes
    producer_time: int | None

    @classmethod
    def of(cls, msg: Message) -> Likeness:
        return cls(content_digest(msg.key()), content_digest(msg.value()), producer_time(msg))

    def matches(self, other: Likeness) -> bool:
        return self.key == other.key and self.value == other.value and \
            same_producer_time(self.producer_time, other.producer_time)


def content_digest(data: bytes | str | None) -> bytes:
    if data is None:
        return b"null"
    return hashlib.blake2b(data.encode() if isinstance(data, str) else data, digest_size=16).digest()


@dataclass(frozen=True)
class Claim:
    """A source record's provenance entry naming its original on the destination."""

    original: int
    likeness: Likeness


def maps_back(config: FlowConfig) -> bool:
    """Whether copies of destination records on the source translate to their originals. Not for
    a flow with filter overrides: it copies destination records back (a full restore), so the
    originals' offsets may be gone."""
    return not config.provenance.filter_overrides


class ReturnedRecords:
    """Looks up, on the source, the destination original of the record at an offset (its consumer
    is opened at the first look-up and closed by `close`)."""

    def __init__(self, source: ClusterContext, header: str, destination_cluster_id: str, *,
                 destination: ClusterContext, shared: bool = False,
                 on_unconfirmed: Callable[[str, str], None] = lambda topic, line: None) -> None:
        """`shared`: read with the clusters' one readers, lent (a command's), else with consumers of
        its own (a loop's); `on_unconfirmed` hears each claim the destination did not confirm: its
        source topic and a line saying what and where."""
        self.source = source.config
        self.header = header
        self.destination_cluster_id = destination_cluster_id
        self.destination = destination.config
        self.on_unconfirmed = on_unconfirmed
        self._consumer = _reader(source, "dr-stream-returned", shared)
        self._dest_consumer = _reader(destination, "dr-stream-returned-originals", shared)
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
        claims: dict[LookUp, tuple[Claim, int]] = {}
        while todo:
            for look, (claim, at) in self._read({tp: looks.pop() for tp, looks in todo.items()}, timeout).items():
                if claim is None:
                    out[look] = None
                    self._remember(look, at, None)
                else:
                    claims[look] = (claim, at)
            todo = {tp: looks for tp, looks in todo.items() if looks}
        verdicts = self._confirmed({look: claim for look, (claim, _) in claims.items()}, timeout)
        for look, (claim, at) in claims.items():
            verdict = verdicts.get(look)
            out[look] = claim.original if verdict else None
            if verdict is not None:  # an unanswered claim is asked again next time
                self._remember(look, at, out[look])
        return out

    def _remember(self, look: LookUp, at: int, original: int | None) -> None:
        """What the record at the look-up's own offset said (a later record is not the look-up's)."""
        if at == look[2]:
            if len(self._known) > 100_000:
                self._known.clear()
            self._known[look] = original

    def _read(self, wave: dict[tuple[str, int], LookUp], timeout: float) -> dict[LookUp, tuple[Claim | None, int]]:
        """The first record at or after each partition's offset, every partition of the wave at
        once: its claim (None for a local record, the end of a partition or no answer within
        `timeout`) and its offset (-1 when none was read)."""
        read = _first_records(self._consumer.get(), {tp: look[2] for tp, look in wave.items()}, timeout)
        out: dict[LookUp, tuple[Claim | None, int]] = {}
        for tp, look in wave.items():
            msg = read.get(tp)
            out[look] = (None, -1) if msg is None else (self._claim(msg, look), offset(msg))
        return out

    def _claim(self, msg: Message, look: LookUp) -> Claim | None:
        _, partition, _, dest_topic = look
        found = (origin_offset(e, self.destination_cluster_id, dest_topic, partition)
                 for e in entries(headers(msg), self.header))
        original = next((o for o in found if o is not None), None)
        return None if original is None else Claim(original, Likeness.of(msg))

    def _confirmed(self, claims: dict[LookUp, Claim], timeout: float) -> dict[LookUp, bool | None]:
        """Per claim, True when the destination's record at its original is like the copy; False
        when it holds another record or none there; None when it did not answer (not said, not
        kept: asked again next time). Read in waves of one claim per destination partition."""
        todo: dict[tuple[str, int], list[LookUp]] = {}
        for look in claims:
            todo.setdefault((look[3], look[1]), []).append(look)
        verdicts: dict[LookUp, bool | None] = {}
        while todo:
            wave = {tp: looks.pop() for tp, looks in todo.items()}
            read = _first_records(self._dest_consumer.get(), {tp: claims[look].original for tp, look in wave.items()},
                                  timeout)
            for tp, look in wave.items():
                claim, msg = claims[look], read.get(tp)
                verdict = None if msg is None else \
                    msg.offset() == claim.original and Likeness.of(msg).matches(claim.likeness)
                verdicts[look] = verdict
                if verdict:
                    continue
                held = ("did not answer" if msg is None else "holds no record there" if msg.offset() != claim.original
                        else "holds another record there")
                self.on_unconfirmed(look[0], (
                    f"provenance: {look[0]}[{look[1]}] at or after offset {look[2]} names "
                    f"{self.destination.alias}'s {look[3]}[{look[1]}]@{claim.original} as its original; "
                    f"{self.destination.alias} {held}: not taken as a copy (a forged or stale header), the "
                    "position translates through the index"))
            todo = {tp: looks for tp, looks in todo.items() if looks}
        return verdicts

    def close(self) -> None:
        self._consumer.close()
        self._dest_consumer.close()


def _reader(cluster: ClusterContext, name: str, shared: bool) -> clients.OnDemandConsumer | clients.LentConsumer:
    if shared:
        return cluster.reader()
    # A look-up at the end of a partition must not wait out the broker's default 500 ms fetch wait.
    return cluster.consumer(name, {
        "enable.partition.eof": True, "isolation.level": "read_committed", "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 10,
    })


def _first_records(consumer: Consumer, starts: dict[tuple[str, int], int], timeout: float
                   ) -> dict[tuple[str, int], Message]:
    """The first record at or after each partition's offset, every partition at once; a partition
    at its end, in error or silent within `timeout` has none."""
    consumer.assign([TopicPartition(t, p, at) for (t, p), at in starts.items()])
    out: dict[tuple[str, int], Message] = {}
    answered: set[tuple[str, int]] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(answered) < len(starts) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=max(100, len(starts)), timeout=clients.CONSUME_WAIT_S):
                where = place(msg)
                if where is None or where not in starts or where in answered:
                    continue  # a later record of a partition already answered
                answered.add(where)
                if msg.error() is None:
                    out[where] = msg
    finally:
        consumer.unassign()
    return out
