"""The bench's workloads, the same for both replicators: what is written, and what is measured.

Every record carries its sequence number (catch-up, failover) or its send time (steady) at the
start of its value, so what arrives on the destination is checked by content, whatever
offsets it landed at.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from dr_stream.background import Background
from dr_stream.core.config import ClusterConfig
from dr_stream.dev import workload
from dr_stream.kafka import clients
from dr_stream.kafka.group_offsets.consumer_groups import committed_offsets

Log = Callable[[str], None]


def bench_cluster(bootstrap: str) -> ClusterConfig:
    """A bench cluster for dr-stream's client builder, which routes librdkafka's lines through logging."""
    return ClusterConfig("bench", bootstrap)


@dataclass(frozen=True)
class Size:
    records: int  # catch-up
    record_bytes: int
    partitions: int
    steady_rate: int  # records/s
    steady_seconds: int
    lag_records: int  # failover topic, one partition
    lags: tuple[int, ...]
    sync_wait_s: int  # how long a group's translated offset may take to appear
    failover_groups: int  # groups (each on 10 partitions) whose failover is timed, dr-stream only
    # A destination offset unchanged this long is taken as final: long enough for MirrorMaker 2's
    # checkpoints to move a provisional offset (the full run), short in the smoke test, which
    # checks only that dr-stream's first offset is its last.
    settle_s: float = 15
    # The long catch-up: the catch-up topic grown to this many records after the runs above,
    # copied once per replicator (0: none).
    long_records: int = 0
    # the replicators the long catch-up runs (empty: every one)
    long_tools: tuple[str, ...] = ()
    # the replicators the rounds run (empty: every one)
    tools: tuple[str, ...] = ()
    # the replicators of those the constrained arm's rounds run (empty: every one)
    constrained_tools: tuple[str, ...] = ()


FULL = Size(1_000_000, 1024, 6, 5000, 60, 110_000, (0, 1_000, 10_000, 100_000), 90, 1000, long_records=5_000_000)
# The smoke run measures nothing, so it waits long for a translated offset: a minute was not
# enough on a host that ran every process 4-6x slower for ten minutes (MirrorMaker 2's CPU-seconds
# too), and a missing offset then reads as a harness fault. It waits only as long as it must. Its
# long catch-up runs MirrorMaker 2 alone: every replicator's start and stop are already exercised
# above, the long run is the same runner for each (it stops at the catch-up), and each replicator
# more took 20 s of the suite (a Spark one the most). Its rounds leave out
# dr-stream's real-time mode (37 s of the suite): the harness runs it as it runs micro-batch,
# from the same flow file with another mode, and the suite runs real-time flows on their own. Its
# constrained arm runs MirrorMaker 2 alone: the arm differs only in the CPUs every replicator's
# processes are started on, and that is tested on its own (tests/test_replicator_costs.py).
SMOKE = Size(6_000, 1024, 6, 200, 5, 2_000, (0, 1_000), 300, 5, settle_s=3, long_records=9_000,
             long_tools=("MirrorMaker 2",), tools=("dr-stream", "plain Spark", "MirrorMaker 2"),
             constrained_tools=("MirrorMaker 2",))


create_topics = workload.create_topics


def recreate_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60) -> None:
    """An empty topic again: a run's steady records must not reach the next run's latency consumer."""
    admin = clients.admin(bench_cluster(bootstrap))
    if topic in admin.list_topics(timeout=10).topics:
        admin.delete_topics([topic])[topic].result(timeout=30)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
            return
        except Exception:  # still being deleted
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _value(seq: int, size: int) -> bytes:
    head = struct.pack(">q", seq)
    return head + bytes(size - len(head))


def load(bootstrap: str, topic: str, records: int, size: int, partitions: int, log: Log) -> float:
    """Writes `records` keyed records with two headers; returns MB written."""
    headers = [("trace-id", b"bench-trace-0123456789"), ("source", b"bench")]
    workload.produce(bootstrap, topic, ({"value": _value(seq, size), "key": f"key-{seq % 10_000}".encode(),
                                         "partition": seq % partitions, "headers": headers} for seq in range(records)),
                     progress=lambda n: log(f"  loaded {n:,} / {records:,} records into {topic}"),
                     **{"linger.ms": 50, "batch.size": 1_000_000, "queue.buffering.max.messages": 200_000,
                        "acks": "all"})
    return records * size / 1e6


def end_total(consumer: Consumer, topic: str, partitions: int) -> int:
    total = 0
    for p in range(partitions):
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)
        except Exception:  # the replicator has not created the topic yet
            return 0
        total += high - low
    return total


@dataclass(frozen=True)
class CatchUp:
    seconds_from_start: float  # replicator start -> every record on the destination
    seconds_copying: float  # first record on the destination -> every record there
    records: int
    megabytes: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds_copying if self.seconds_copying else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.megabytes / self.seconds_copying if self.seconds_copying else 0.0


def wait_copied(bootstrap: str, topic: str, records: int, partitions: int, started_at: float, megabytes: float,
                alive: Callable[[], None], log: Log, timeout_s: float = 900,
                on_first: Callable[[], None] | None = None) -> CatchUp:
    consumer = clients.consumer(bench_cluster(bootstrap), "bench-peek")
    first = None
    last_print = 0.0
    try:
        while True:
            alive()
            now = time.monotonic()
            have = end_total(consumer, topic, partitions)
            if have and first is None:
                first = now
                if on_first:
                    on_first()
            if now - last_print >= 5:
                log(f"  {topic}: {have:,} / {records:,} records on the destination, {now - started_at:.0f}s")
                last_print = now
            if have >= records:
                return CatchUp(now - started_at, now - (first or now), records, megabytes)
            if now - started_at > timeout_s:
                raise TimeoutError(f"{topic}: {have} of {records} records after {timeout_s:.0f}s")
            time.sleep(0.25)
    finally:
        consumer.close()


def wait_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 120) -> None:
    admin = clients.admin(bench_cluster(bootstrap))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = admin.list_topics(timeout=10).topics.get(topic)
        if found is not None and found.error is None and len(found.partitions) >= partitions:
            return
        time.sleep(0.5)
    raise TimeoutError(f"{topic} did not appear on the destination within {timeout_s:.0f}s")


def steady(source: str, source_topic: str, destination: str, dest_topic: str, size: Size, log: Log) -> list[float]:
    """Writes `steady_rate` records/s for `steady_seconds`, each stamped with its send time; a consumer
    on the destination measures each record's end-to-end latency in ms."""
    total = size.steady_rate * size.steady_seconds
    latencies: list[float] = []
    done = threading.Event()

    def consume() -> None:
        consumer = clients.consumer(bench_cluster(destination), "bench-latency", {"fetch.wait.max.ms": 5})
        consumer.assign([TopicPartition(dest_topic, p, 0) for p in range(size.partitions)])
        deadline = None
        try:
            while len(latencies) < total:
                # consume() waits for all num_messages or the whole timeout: at 5,000 records/s a
                # 100 ms timeout put up to 100 ms of the harness's own wait into every latency.
                # poll() returns each record as soon as it arrives.
                msg = consumer.poll(0.1)
                if msg is not None and msg.error() is None:
                    latencies.append((time.time_ns() - struct.unpack(">q", (msg.value() or b"")[:8])[0]) / 1e6)
                if done.is_set():
                    deadline = deadline or time.monotonic() + 60
                    if time.monotonic() > deadline:
                        break
        finally:
            consumer.close()

    reader = Background("latency reader", consume).start()
    producer = clients.producer(bench_cluster(source), {"linger.ms": 0, "acks": "all"})
    began = time.monotonic()
    per_tick, tick = size.steady_rate // 100, 0.01
    sent = 0
    while sent < total:
        target = began + (sent // per_tick) * tick
        pause = target - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        for _ in range(per_tick):
            producer.produce(source_topic, _value(time.time_ns(), size.record_bytes), partition=sent % size.partitions)
            sent += 1
        producer.poll(0)
        if sent % (size.steady_rate * 10) == 0:
            log(f"  steady: {sent:,} / {total:,} sent, {len(latencies):,} received")
    producer.flush(30)
    done.set()
    reader.join(timeout=90)
    log(f"  steady: {len(latencies):,} of {total:,} received")
    return latencies


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


@dataclass(frozen=True)
class GroupOutcome:
    lag: int
    committed: int  # on the source
    translated: int | None  # on the destination, once it stopped moving
    sync_seconds: float | None  # commit on the source -> that offset live on the destination
    reread: int
    skipped: int
    first_translated: int | None = None  # the first offset the destination group ever showed

    @property
    def first_was_final(self) -> bool | None:
        return None if self.translated is None else self.first_translated == self.translated


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    workload.commit_positions(bootstrap, {group: {(topic, 0): offset}})


def _sequences_from(bootstrap: str, topic: str, offset: int) -> list[int]:
    consumer = clients.consumer(bench_cluster(bootstrap), "bench-resume", {"enable.partition.eof": True})
    out = []
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        while True:
            messages = consumer.consume(num_messages=10_000, timeout=5)
            if not messages:
                break
            eof = False
            for msg in messages:
                if msg.error():
                    eof = True
                    break
                out.append(struct.unpack(">q", (msg.value() or b"")[:8])[0])
            if eof:
                break
    finally:
        consumer.close()
    return out


def failover_exactness(source: str, source_topic: str, destination: str, dest_topic: str, size: Size, tool: str,
                       log: Log, delay_s: float = 0) -> list[GroupOutcome]:
    """Groups commit on the source at each lag behind the head; once the replicator has put a
    translated offset on the destination (and it has stopped moving), each group resumes there.
    The first offset each group showed on the destination is kept too: a replicator that syncs a
    provisional offset first would send a failover at that moment to the wrong place."""
    time.sleep(delay_s)
    groups = {lag: f"bench-{tool}-lag-{lag}" for lag in size.lags}
    committed_at = {lag: size.lag_records - lag for lag in size.lags}
    began = time.monotonic()
    for lag, group in groups.items():
        commit(source, group, source_topic, committed_at[lag])
    seen: dict[int, tuple[int, float]] = {}
    first: dict[int, int] = {}
    target = ClusterConfig("bench-destination", destination)
    deadline = began + size.sync_wait_s
    while time.monotonic() < deadline:
        for lag, group in groups.items():
            try:
                found = committed_offsets(target, group, [(dest_topic, 0)], timeout=10).get((dest_topic, 0))
            except Exception:  # the group's coordinator is not ready yet
                found = None
            offset = found.offset if found is not None else None
            if offset is not None and (lag not in seen or seen[lag][0] != offset):
                seen[lag] = (offset, time.monotonic() - began)
                first.setdefault(lag, offset)
        # A replicator may first sync a provisional offset and move it forward later (dr-stream does
        # while its index catches up): only an offset unchanged for `settle_s` is taken as final.
        settled = (len(seen) == len(groups)
                   and time.monotonic() - began - max(t for _, t in seen.values()) > size.settle_s)
        if settled:
            break
        time.sleep(0.05)
    outcomes = []
    for lag in size.lags:
        at = committed_at[lag]
        if lag not in seen:
            outcomes.append(GroupOutcome(lag, at, None, None, 0, 0))
            log(f"  {groups[lag]}: no translated offset on the destination after {size.sync_wait_s}s")
            continue
        translated, when = seen[lag]
        read = _sequences_from(destination, dest_topic, translated)
        reread = sum(1 for s in read if s < at) + len(read) - len(set(read))
        skipped = len(set(range(at, size.lag_records)) - set(read))
        outcomes.append(GroupOutcome(lag, at, translated, round(when, 2), reread, skipped, first[lag]))
        log(f"  {groups[lag]}: committed {at} on the source -> {translated} on the destination after "
            f"{when:.2f}s (first synced: {first[lag]}); {reread} re-read, {skipped} skipped")
    return outcomes
