"""The runs topic: where the sink's producer reports what it copied, on the destination cluster.

One topic per flow, `__dr_stream_runs.<flow>`, one partition so every report keeps the order
it was published in. Key: JSON `{"topic", "partition", "dest_start"}` (destination partition and
the run's first destination offset); value: JSON with the run's origin cluster, topic and
partition, origin and destination start/end offsets, first/last record timestamps and the
time of its newest acknowledgement (ms). A run that grows is published again under the same
key, so compaction keeps only its newest version.

The topic is a queue between the sink and the offset index table, not a store: the flow reads
it only from where its table left off (appended every 30 s), and once the table holds a run
the topic's record of it has no reader left. So the flow deletes the records the table held
`TRIM_AFTER_S` ago (`RunsTrim`, a delete-records request): what the topic keeps follows the
table's lag, not the flow's age, even where every batch makes new keys (a transactional
source's markers, identical topic names both ways). The wait leaves a command that read the
table time to read the topic from where it stops. Where the flow may not delete records,
compaction (every version but the newest of a run, soon after its segment rolls) and a day's
retention bound it instead. A reader that finds its start deleted (the table was older than
the topic's start) reads from the topic's start, and the start-up scan of the destination
rebuilds any run the topic no longer holds.

Invariants: a report that does not parse is counted and skipped, never fatal; a reader sees
reports in the order the producers published them (one partition); no record is deleted that
the table did not hold `TRIM_AFTER_S` before.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from dr_stream.core.config import ClusterConfig
from dr_stream.core.contracts import read_run
from dr_stream.index.run_store import Run
from dr_stream.kafka import clients
from dr_stream.kafka.admin import create_topic, partition_counts, settle_topic_configs
from dr_stream.kafka.authorization import NotAuthorized, denied, not_authorized
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.kafka.consumed import offset

# What bounds the topic where the flow may not delete records (`RunsTrim`): a run's versions
# are compacted once their segment rolls, and what the table has not taken in a day (a flow
# stopped that long) is rebuilt from the destination at its start.
CONFIGS = {
    "cleanup.policy": "compact,delete",
    "min.compaction.lag.ms": "0",
    "retention.ms": str(24 * 3600 * 1000),
    # Compaction, retention and a trim's deletion on disk only take closed segments: a segment
    # a minute keeps what the topic holds on disk within minutes of what it holds.
    "segment.ms": str(60 * 1000),
}

# How long the topic keeps a run after the table holds it: a command reads the table, then the
# topic from where the table stops, well within this (and reads the table again if not).
TRIM_AFTER_S = 60.0


def ensure_runs_topic(admin: AdminClient, topic: str, timeout: float = 30.0) -> bool:
    """Creates the runs topic if missing; True when it was created."""
    if topic in partition_counts(admin, timeout):
        return False
    return create_topic(admin, topic, 1, CONFIGS, timeout)


def settle_runs_topic(admin: AdminClient, topic: str, timeout: float = 15.0) -> dict[str, str]:
    """Gives a runs topic an older release made the configs this one makes (`CONFIGS`); returns
    what it set."""
    return settle_topic_configs(admin, topic, CONFIGS, timeout)


def trim_runs_topic(admin: AdminClient, topic: str, through: int, timeout: float = 15.0) -> int:
    """Deletes the topic's records at and below offset `through`; returns its log start after."""
    done = admin.delete_records([TopicPartition(topic, 0, through + 1)], request_timeout=timeout)
    return int(next(iter(done.values())).result(timeout=timeout).low_watermark)


@dataclass
class RunsTrim:
    """Deletes from the runs topic what the offset index table has held for `after_s`.

    The feed tells it each position it appended through (`appended`) and asks it at each upkeep
    (`trim`). A refusal (`NotAuthorized`: no DELETE on the topic) is said once and trimming stops
    (compaction and retention bound the topic then); any other failure is said and tried at the
    next upkeep.

    Invariant: it never deletes past a position the table held `after_s` before.
    """

    delete_through: Callable[[int], int]  # `trim_runs_topic` bound to the topic: through -> log start
    log: Callable[[str], None]
    where: str  # the topic and its cluster, as the log lines name them
    after_s: float = TRIM_AFTER_S
    clock: Callable[[], float] = time.monotonic
    trimmed_through: int = -1
    refused: bool = False
    _appended: deque[tuple[float, int]] = field(default_factory=deque)
    _ready: int = -1  # the newest position held `after_s` (kept until a delete through it succeeds)

    def appended(self, position: int) -> None:
        """The table now holds every run published at or below runs-topic offset `position`."""
        if not self._appended or position > self._appended[-1][1]:
            self._appended.append((self.clock(), position))

    def due(self) -> int | None:
        """The newest position the table held at least `after_s` ago, if past what was trimmed;
        older marks are dropped, so the marks kept span at most `after_s`."""
        now = self.clock()
        while self._appended and now - self._appended[0][0] >= self.after_s:
            self._ready = max(self._ready, self._appended.popleft()[1])
        return self._ready if self._ready > self.trimmed_through else None

    def trim(self) -> None:
        through = None if self.refused else self.due()
        if through is None:
            return
        try:
            self.delete_through(through)
            self.trimmed_through = through
        except NotAuthorized as exc:
            self.refused = True
            self.log(f"{exc}; compaction and a day's retention bound the topic instead")
        except Exception as exc:
            self.log(f"{self.where}: not trimmed through offset {through} ({exc}); tried again at the next upkeep")


def runs_trim(admin: AdminClient, topic: str, destination: ClusterConfig, log: Callable[[str], None]) -> RunsTrim:
    """The trimming of a flow's runs topic on the destination."""
    def delete_through(through: int) -> int:
        try:
            return trim_runs_topic(admin, topic, through)
        except Exception as exc:
            if denied(exc):
                raise not_authorized(destination.alias, destination.kafka, "DELETE", f"TOPIC {topic}",
                                     "deleting the runs the offset index holds") from exc
            raise

    return RunsTrim(delete_through, log, f"{topic} on {destination.alias}")


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

    def __init__(self, destination: ClusterContext, topic: str, start: int | None = None,
                 shared: bool = False) -> None:
        """`shared`: read with the destination's one reader, lent (a command's), else with a
        consumer of its own (the index feed's, on its own thread)."""
        self.topic = topic
        self.position = start
        self._consumer: clients.OnDemandConsumer | clients.LentConsumer = destination.reader() if shared else \
            destination.consumer("dr-stream-runs", {"enable.partition.eof": True, "fetch.wait.max.ms": 50,
                                                    # a start retention deleted: from the first run still there
                                                    "auto.offset.reset": "earliest"})
        self._assigned = False

    def end(self, timeout: float = 10.0) -> int:
        """The runs topic's current end offset."""
        _, high = self._consumer.get().get_watermark_offsets(TopicPartition(self.topic, 0), timeout=timeout)
        return high

    def deleted_past_start(self, timeout: float = 10.0) -> int | None:
        """The topic's first offset when it lies past where this reader starts (the records
        between were trimmed or retention deleted them), else None."""
        if self.position is None:
            return None
        low, _ = self._consumer.get().get_watermark_offsets(TopicPartition(self.topic, 0), timeout=timeout)
        return low if low > self.position else None

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
