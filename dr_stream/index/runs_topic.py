"""The runs topic: where the sink's producer reports what it copied, on the destination cluster.

One topic per flow, `__dr_stream_runs.<flow>`, one partition so every report keeps the order
it was published in. Key: JSON `{"topic", "partition", "dest_start"}` (destination partition and
the run's first destination offset); value: JSON with the run's origin cluster, topic and
partition, origin and destination start/end offsets, first/last record timestamps and the
time of its newest acknowledgement (ms). A run that grows is published again under the same
key, so compaction keeps only its newest version; `min.compaction.lag.ms` leaves a day for the
flow to read every version before compaction may remove it. Runs older than a week are deleted
(`cleanup.policy` compact and delete): a run's key is new each time copying breaks (a
transactional source's markers, identical topic names both ways), so compaction alone would
keep a record for every run ever made. The flow reads the topic only from where its offset
index table left off (appended every 30 s), and a reader that finds its start deleted (a flow
stopped for longer than a week) reads from the topic's start, while the start-up scan of the
destination rebuilds any run the topic no longer holds.

Invariants: a report that does not parse is counted and skipped, never fatal; a reader sees
reports in the order the producers published them (one partition).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from dr_stream.core.config import ClusterConfig
from dr_stream.core.contracts import read_run
from dr_stream.index.run_store import Run
from dr_stream.kafka import clients
from dr_stream.kafka.admin import create_topic, partition_counts, settle_topic_configs
from dr_stream.kafka.consumed import offset

CONFIGS = {
    "cleanup.policy": "compact,delete",
    "min.compaction.lag.ms": str(24 * 3600 * 1000),
    "retention.ms": str(7 * 24 * 3600 * 1000),
    # Compaction and deletion only take closed segments: roll hourly so a run's old versions can go.
    "segment.ms": str(3600 * 1000),
}


def ensure_runs_topic(admin: AdminClient, topic: str, timeout: float = 30.0) -> bool:
    """Creates the runs topic if missing; True when it was created."""
    if topic in partition_counts(admin, timeout):
        return False
    return create_topic(admin, topic, 1, CONFIGS, timeout)


def settle_runs_topic(admin: AdminClient, topic: str, timeout: float = 15.0) -> dict[str, str]:
    """Gives a runs topic an older release made the configs this one makes (`CONFIGS`); returns
    what it set."""
    return settle_topic_configs(admin, topic, CONFIGS, timeout)


def parse_run(value: bytes | None) -> Run | None:
    """A published run, or None when the value is not one (the key repeats what the value says)."""
    members = read_run(value)
    return None if members is None else Run(**members)


@dataclass
class RunsRead:
    runs: list[tuple[int, Run]]  # (offset in the runs topic, run)
    malformed: int
    position: int  # the next offset to read


class RunsReader:
    """Reads the runs topic from a given offset; opens its consumer at the first read."""

    def __init__(self, destination: ClusterConfig, topic: str, start: int | None = None,
                 reader: clients.LentConsumer | None = None) -> None:
        """`reader`: a command's reader of the destination (`cluster_context`), else one of its own."""
        self.topic = topic
        self.position = start
        self._consumer: clients.OnDemandConsumer | clients.LentConsumer = reader if reader is not None else \
            clients.OnDemandConsumer(destination, "dr-stream-runs", {"enable.partition.eof": True,
                                                                     "fetch.wait.max.ms": 50,
                                                                     # a start retention deleted: from
                                                                     # the first run still there
                                                                     "auto.offset.reset": "earliest"})
        self._assigned = False

    def end(self, timeout: float = 10.0) -> int:
        """The runs topic's current end offset."""
        _, high = self._consumer.get().get_watermark_offsets(TopicPartition(self.topic, 0), timeout=timeout)
        return high

    def read(self, timeout: float = 0.2, most: int = 10000) -> RunsRead:
        """What was published since the last read, waiting at most `timeout` for something new."""
        consumer = self._consumer.get()
        if not self._assigned:
            start = OFFSET_BEGINNING if self.position is None else self.position
            consumer.assign([TopicPartition(self.topic, 0, start)])
            self._assigned = True
        runs, malformed = [], 0
        for msg in consumer.consume(num_messages=most, timeout=timeout):
            if msg.topic() != self.topic:  # a lent reader's earlier assignment, not yet drained
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    self.position = max(self.position or 0, offset(msg))
                continue
            self.position = offset(msg) + 1
            run = parse_run(msg.value())
            if run is None:
                malformed += 1
            else:
                runs.append((offset(msg), run))
        return RunsRead(runs, malformed, self.position or 0)

    def read_to_end(self, timeout: float = 30.0) -> RunsRead:
        """Everything published up to now."""
        end = self.end()
        deadline = time.monotonic() + timeout
        out = RunsRead([], 0, self.position or 0)
        while (self.position or 0) < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.topic}: could not read to offset {end} in {timeout:g} s "
                                   f"(at {self.position})")
            got = self.read(timeout=clients.CONSUME_WAIT_S)
            out.runs += got.runs
            out.malformed += got.malformed
            out.position = got.position
        return out

    def close(self) -> None:
        self._consumer.close()
