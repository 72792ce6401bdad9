"""The runs no report covers yet, read from the end of the destination's partitions.

A flow killed between writing a batch and publishing its runs leaves copies on the destination
that its offset index does not know. The flow rebuilds them at its next start
(`index_feed.catch_up`); a failover run while the flow is down cannot wait for that, so it
reads each destination partition from just past its last known run to its log end (a batch at
most) and turns the copies it finds into runs.

`runs_of_records` is the rule (pure): a record belongs to the flow when its newest provenance
entry names the flow's source cluster and the topic it was copied from; consecutive records
whose origin and destination offsets both advance by one form one run.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace

from confluent_kafka import TopicPartition

from dr_stream.core.config import ClusterConfig
from dr_stream.core.policy import TopicRenamer
from dr_stream.core.provenance import Headers, newest_entry
from dr_stream.index.run_store import Run
from dr_stream.kafka.clients import CONSUME_WAIT_S, consuming

# (destination topic, partition, offset, timestamp ms, headers)
Record = tuple[str, int, int, int, Headers]


def runs_of_records(records: Iterable[Record], header: str, source_cluster_id: str,
                    renamer: TopicRenamer) -> list[Run]:
    """Destination records, in offset order per partition -> the runs of this flow's copies."""
    out: list[Run] = []
    open_at: dict[tuple[str, int], int] = {}  # destination partition -> index in `out` of its last run
    for topic, partition, offset, timestamp, headers in records:
        entry = newest_entry(headers, header)
        if not entry or entry.get("cluster") != source_cluster_id or not isinstance(entry.get("offset"), int) \
                or not isinstance(entry.get("partition"), int) or renamer.format_remote_topic(entry.get("topic", "")) \
                != topic:
            continue
        origin = entry["offset"]
        at = open_at.get((topic, partition))
        run = None if at is None else out[at]
        if run and run.origin_partition == entry["partition"] and run.origin_end + 1 == origin \
                and run.dest_end + 1 == offset:
            out[at] = replace(run, origin_end=origin, dest_end=offset, last_timestamp=timestamp,
                              copied_at=entry.get("timestamp"))
        else:
            open_at[(topic, partition)] = len(out)
            out.append(Run(source_cluster_id, entry["topic"], entry["partition"], topic, partition, origin, origin,
                           offset, offset, timestamp, timestamp, entry.get("timestamp")))
    return out


def read_tail(destination: ClusterConfig, gaps: dict[tuple[str, int], tuple[int, int]], header: str,
              source_cluster_id: str, renamer: TopicRenamer, timeout: float = 10.0) -> list[Run]:
    """The flow's runs in [first, end) of each destination partition in `gaps`.

    A partition's read gives up only after `timeout` seconds without a record, so a long tail is
    read whole however long it takes.
    """
    records: list[Record] = []
    settings = {"enable.partition.eof": True}
    with consuming(destination, "dr-stream-tail", settings) as consumer:
        for (topic, partition), (first, end) in sorted(gaps.items()):
            consumer.assign([TopicPartition(topic, partition, first)])
            done = False
            idle_until = time.monotonic() + timeout
            while not done and time.monotonic() < idle_until:
                messages = consumer.consume(num_messages=5000, timeout=CONSUME_WAIT_S)
                if messages:
                    idle_until = time.monotonic() + timeout
                for msg in messages:
                    if msg.error() or msg.offset() >= end:
                        done = True
                        break
                    records.append((topic, partition, msg.offset(), msg.timestamp()[1], msg.headers()))
                    done = msg.offset() >= end - 1
            consumer.unassign()
    return runs_of_records(records, header, source_cluster_id, renamer)
