"""The lag history topic: what a running flow measured, kept for `status --plot`.

One topic per flow on the destination, `__dr_stream_lag.<flow>`, one partition, deleted by
time after `RETENTION_MS`. Each record is one sample of the whole flow: value JSON
`{"at": ms, "topics": {"<source topic>": [records behind, seconds behind or null]}}`, where a
topic's records are summed over its partitions and its seconds are those of its most behind
partition. A sample every few seconds is a few KB an hour per topic, on the cluster that
survives the source's loss.

Invariant: a record that does not parse is skipped, never fatal.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from dr_stream.core.contracts import lag_topic
from dr_stream.core.lag import PartitionLag
from dr_stream.kafka.admin import create_topic, partition_counts
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.kafka.consumed import offset

RETENTION_MS = 7 * 24 * 3600 * 1000


@dataclass(frozen=True)
class LagSample:
    at_ms: int
    # source topic -> (records behind, seconds behind or None when unknown)
    topics: dict[str, tuple[int, float | None]]


def sample_of(lags: Iterable[PartitionLag], at_ms: int) -> LagSample:
    topics: dict[str, tuple[int, float | None]] = {}
    for g in lags:
        if g.lag_records is None:
            continue
        records, seconds = topics.get(g.topic, (0, 0.0))
        if seconds is not None:
            seconds = None if g.lag_seconds is None else max(seconds, g.lag_seconds)
        topics[g.topic] = (records + g.lag_records, seconds)
    return LagSample(at_ms, topics)


def encode(sample: LagSample) -> bytes:
    return json.dumps({"at": sample.at_ms, "topics": {t: list(v) for t, v in sample.topics.items()}}).encode()


def decode(value: bytes | None) -> LagSample | None:
    if value is None:
        return None
    try:
        v = json.loads(value)
        topics = {str(t): (int(r), None if s is None else float(s)) for t, (r, s) in v["topics"].items()}
        return LagSample(int(v["at"]), topics)
    except (TypeError, ValueError, KeyError, AttributeError):
        return None


def ensure_lag_topic(admin: AdminClient, topic: str, timeout: float = 30.0) -> bool:
    if topic in partition_counts(admin, timeout):
        return False
    return create_topic(admin, topic, 1, {"cleanup.policy": "delete", "retention.ms": str(RETENTION_MS)}, timeout)


def read_samples(cluster: ClusterContext, flow_name: str, since_ms: int, timeout: float = 30.0) -> list[LagSample]:
    """The flow's samples taken at or after `since_ms`, oldest first."""
    topic = lag_topic(flow_name)
    with cluster.consuming("dr-stream-lag-history", {"enable.partition.eof": True}) as consumer:
        if topic not in consumer.list_topics(timeout=timeout).topics:
            return []
        start = consumer.offsets_for_times([TopicPartition(topic, 0, since_ms)], timeout=timeout)[0]
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout)
        if start.offset < 0 or start.offset >= end:
            return []
        consumer.assign([start])
        out: list[LagSample] = []
        deadline, position = time.monotonic() + timeout, start.offset
        while position < end and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=5000, timeout=0.5):
                if msg.error() is None:
                    position = offset(msg) + 1
                    sample = decode(msg.value())
                    if sample is not None:
                        out.append(sample)
        return out
