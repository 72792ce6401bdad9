"""Returned records looked up for a whole round at once, on a real broker: each look-up finds the
original its record names, local records and log ends find none, and the reads go in waves of
one offset per partition, not one read per look-up."""

from __future__ import annotations

import json
import time

import pytest

from dr_stream.core.config import ClusterConfig
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.positions.returned_records import ReturnedRecords
from tests.kafka_tools import create_topic, delete_topics, produce, unique

H = "__replicator_id"
pytestmark = pytest.mark.integration
# Producer times of now: the test brokers enforce their 7-day retention every 5 s, and a record
# stamped years ago would be gone before it is looked up.
NOW_MS = int(time.time() * 1000)


class _CountedWaves(ReturnedRecords):
    waves = 0

    def _read(self, wave, timeout):
        self.waves += 1
        return super()._read(wave, timeout)


def _original(partition: int, offset: int) -> dict:
    return {"key": f"k{partition}-{offset}".encode(), "value": f"v{partition}-{offset}".encode(),
            "partition": partition, "timestamp": NOW_MS + offset}


def _record(partition: int, offset: int, back: str, dc2_id: str) -> dict:
    """Offsets 0-4 of each partition are copies of dc2's `back` offsets 0-4; 5 and 6 are local."""
    if offset >= 5:
        return {"value": b"local", "partition": partition}
    entry = {"cluster": dc2_id, "topic": back, "partition": partition, "offset": offset, "timestamp": 1}
    return {**_original(partition, offset), "headers": [(H, json.dumps(entry).encode())]}


def test_a_rounds_look_ups_are_read_in_one_wave_per_offset_of_a_partition_and_each_finds_its_original(
        dc1, dc2, topics):
    topic, back = unique("returned."), unique("back.")
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, partitions=3)
    create_topic(dc2.bootstrap, back, partitions=3)
    produce(dc2.bootstrap, back, (_original(p, o) for p in range(3) for o in range(5)))
    produce(dc1.bootstrap, topic, (_record(p, o, back, dc2.cluster_id()) for p in range(3) for o in range(7)))
    returned = _CountedWaves(ClusterContext(ClusterConfig("dc1", dc1.bootstrap)), H, dc2.cluster_id(),
                             destination=ClusterContext(ClusterConfig("dc2", dc2.bootstrap)))
    try:
        looks = {(topic, p, o, back) for p in range(3) for o in (0, 3, 5, 6, 7)} | {(topic, 0, 1, "elsewhere")}
        found = returned.originals(looks, {(topic, p): 7 for p in range(3)})
        wanted = {(topic, p, o, back): o if o < 5 else None for p in range(3) for o in (0, 3, 5, 6, 7)}
        assert found == {**wanted, (topic, 0, 1, "elsewhere"): None}
        # partition 0 has five offsets to read (0, 1, 3, 5, 6); the log end is known empty
        assert returned.waves == 5
        # a record never changes: what it said is not read again
        assert returned.originals({(topic, 1, 3, back)}) == {(topic, 1, 3, back): 3}
        assert returned.waves == 5
        # without the log end, a look-up there is read and finds the end of the partition
        assert returned.originals({(topic, 2, 7, back)}) == {(topic, 2, 7, back): None}
        assert returned.waves == 6
    finally:
        returned.close()
        delete_topics(dc2.bootstrap, [back])


def test_a_provenance_claim_the_destination_does_not_confirm_moves_no_position_and_is_said(dc1, dc2, topics):
    """Anyone who may write the source topic can write a header naming the destination's
    cluster.id (not a secret): the record it names must be there, alike."""
    topic, back = unique("forged."), unique("back.")
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, partitions=1)
    create_topic(dc2.bootstrap, back, partitions=1)
    produce(dc2.bootstrap, back, (_original(0, o) for o in range(5)))

    def claiming(original: int, record: dict) -> dict:
        entry = {"cluster": dc2.cluster_id(), "topic": back, "partition": 0, "offset": original, "timestamp": 1}
        return {**record, "partition": 0, "headers": [(H, json.dumps(entry).encode())]}

    produce(dc1.bootstrap, topic, [
        claiming(1, _original(0, 1)),                      # 0: a true copy of dc2's offset 1
        claiming(4, {"key": b"evil", "value": b"x"}),      # 1: names offset 4, which holds another record
        claiming(900, _original(0, 2)),                    # 2: names an offset dc2 does not hold
        claiming(3, {**_original(0, 3), "timestamp": 5}),  # 3: same key and value, another producer time
    ])
    said: list[tuple[str, str]] = []
    returned = ReturnedRecords(ClusterContext(ClusterConfig("dc1", dc1.bootstrap)), H, dc2.cluster_id(),
                               destination=ClusterContext(ClusterConfig("dc2", dc2.bootstrap)),
                               on_unconfirmed=lambda t, line: said.append((t, line)))
    try:
        found = returned.originals({(topic, 0, o, back) for o in range(4)}, {(topic, 0): 4})
        assert found == {(topic, 0, 0, back): 1, (topic, 0, 1, back): None, (topic, 0, 2, back): None,
                         (topic, 0, 3, back): None}
        assert sorted(line for _, line in said) == sorted([
            f"provenance: {topic}[0] at or after offset 1 names dc2's {back}[0]@4 as its original; dc2 holds "
            "another record there: not taken as a copy (a forged or stale header), the position translates "
            "through the index",
            f"provenance: {topic}[0] at or after offset 2 names dc2's {back}[0]@900 as its original; dc2 holds "
            "no record there: not taken as a copy (a forged or stale header), the position translates through "
            "the index",
            f"provenance: {topic}[0] at or after offset 3 names dc2's {back}[0]@3 as its original; dc2 holds "
            "another record there: not taken as a copy (a forged or stale header), the position translates "
            "through the index"])
        assert {t for t, _ in said} == {topic}
        # a verdict is kept like the record: asked again, it is neither read nor said again
        assert returned.originals({(topic, 0, 1, back)}) == {(topic, 0, 1, back): None} and len(said) == 3
    finally:
        returned.close()
        delete_topics(dc2.bootstrap, [back])
