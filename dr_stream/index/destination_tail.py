"""The runs no report covers yet, read from the end of the destination's partitions.

A flow killed between writing a batch and publishing its runs leaves copies on the destination
that its offset index does not know. Two readers need them: the flow at its next start, before
it copies anything (`index_feed.catch_up`, within a deadline), and a failover run while the flow
is down (no JVM). Both read each destination partition from just past its last known run to its
log end (a batch at most), all partitions side by side, and turn the copies into runs here.

`runs_of_records` is the rule (pure): a record belongs to the flow when its newest provenance
entry names the flow's source cluster and the topic it was copied from; consecutive records
whose origin and destination offsets both advance by one form one run. The sink's producer
applies the same rule as it writes (jvm/ `CopyRuns`); tests/contracts/copied_records.json holds
cases both must answer alike.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from confluent_kafka import Consumer, TopicPartition

from dr_stream.core.policy import TopicRenamer
from dr_stream.core.provenance import Headers, newest_entry
from dr_stream.index.run_store import Run
from dr_stream.kafka import consumed
from dr_stream.kafka.clients import CONSUME_WAIT_S, LentConsumer
from dr_stream.kafka.cluster_context import ClusterContext

# (destination topic, partition, offset, timestamp ms, headers)
Record = tuple[str, int, int, int, Headers]


def runs_of_records(records: Iterable[Record], header: str, source_cluster_id: str,
                    renamer: TopicRenamer) -> list[Run]:
    """Destination records, in offset order per partition -> the runs of this flow's copies."""
    out: list[Run] = []
    open_at: dict[tuple[str, int], int] = {}  # destination partition -> index in `out` of its last run
    for topic, partition, offset, timestamp, headers in records:
        # An entry is read whole or not at all (`contracts.provenance_entry`): its members are typed.
        entry = newest_entry(headers, header)
        if not entry or entry["cluster"] != source_cluster_id or renamer.format_remote_topic(entry["topic"]) != topic:
            continue
        origin = entry["offset"]
        at = open_at.get((topic, partition))
        run = None if at is None else out[at]
        if at is not None and run and run.origin_partition == entry["partition"] and run.origin_end + 1 == origin \
                and run.dest_end + 1 == offset:
            out[at] = replace(run, origin_end=origin, dest_end=offset, last_timestamp=timestamp,
                              copied_at=entry["timestamp"])
        else:
            open_at[(topic, partition)] = len(out)
            out.append(Run(source_cluster_id, entry["topic"], entry["partition"], topic, partition, origin, origin,
                           offset, offset, timestamp, timestamp, entry["timestamp"]))
    return out


class TailTimedOut(RuntimeError):
    """The tail was not read whole within the deadline; no run of it is used."""


def read_tail(destination: ClusterContext, gaps: dict[tuple[str, int], tuple[int, int]], header: str,
              source_cluster_id: str, renamer: TopicRenamer, idle_s: float = 10.0,
              deadline_s: float | None = None, reader: LentConsumer | None = None) -> list[Run]:
    """The flow's runs in [first, end) of each destination partition in `gaps`, every partition
    read side by side.

    Reading stops early only when no record came for `idle_s` seconds (the partitions still open
    are left as read), or, with `deadline_s`, when the whole read took longer: then it raises
    TailTimedOut, since runs of some partitions and not others would look complete. `reader`: a
    command's reader of the destination (`cluster_context`), else a consumer of its own.
    """
    wanted = {tp: span for tp, span in gaps.items() if span[1] > span[0]}
    read: dict[tuple[str, int], list[Record]] = {tp: [] for tp in wanted}
    began = time.monotonic()
    with _reading(destination, reader) as consumer:
        consumer.assign([TopicPartition(t, p, first) for (t, p), (first, _) in wanted.items()])
        open_partitions = set(wanted)
        idle_until = time.monotonic() + idle_s
        while open_partitions and time.monotonic() < idle_until:
            if deadline_s is not None and time.monotonic() - began > deadline_s:
                raise TailTimedOut(f"{len(open_partitions)} of {len(wanted)} partitions not read whole within "
                                   f"{deadline_s:g} s")
            messages = consumer.consume(num_messages=5000, timeout=CONSUME_WAIT_S)
            if messages:
                idle_until = time.monotonic() + idle_s
            for msg in messages:
                tp = consumed.place(msg)
                if tp is None or tp not in open_partitions:
                    continue
                end = wanted[tp][1]
                if msg.error() is None and consumed.offset(msg) < end:
                    read[tp].append((*tp, consumed.offset(msg), consumed.timestamp(msg), consumed.headers(msg)))
                if msg.error() is not None or consumed.offset(msg) >= end - 1:
                    open_partitions.discard(tp)
                    consumer.pause([TopicPartition(*tp)])
    return runs_of_records((r for tp in sorted(read) for r in read[tp]), header, source_cluster_id, renamer)


@contextmanager
def _reading(destination: ClusterContext, reader: LentConsumer | None) -> Iterator[Consumer]:
    """The lent reader, its partitions resumed and dropped after (librdkafka keeps a partition
    paused across assignments), or a consumer of the tail's own, closed after."""
    if reader is None:
        with destination.consuming("dr-stream-tail", {"enable.partition.eof": True}) as consumer:
            yield consumer
        return
    consumer = reader.get()
    try:
        yield consumer
    finally:
        consumer.resume(consumer.assignment())
        reader.close()
