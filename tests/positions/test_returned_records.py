"""Returned records looked up for a whole round at once, on a real broker: each look-up finds the
original its record names, local records and log ends find none, and the reads go in waves of
one offset per partition, not one read per look-up."""

from __future__ import annotations

import json

import pytest

from dr_stream.core.config import ClusterConfig
from dr_stream.positions.returned_records import ReturnedRecords
from tests.kafka_tools import create_topic, produce, unique

H = "__replicator_id"
pytestmark = pytest.mark.integration


class _CountedWaves(ReturnedRecords):
    waves = 0

    def _read(self, wave, timeout):
        self.waves += 1
        return super()._read(wave, timeout)


def _record(partition: int, offset: int) -> dict:
    """Offsets 0-4 of each partition are copies of dc2's `back` offsets 100+; 5 and 6 are local."""
    if offset >= 5:
        return {"value": b"local", "partition": partition}
    entry = {"cluster": "dc2-id", "topic": "back", "partition": partition, "offset": 100 + offset, "timestamp": 1}
    return {"value": b"copy", "partition": partition, "headers": [(H, json.dumps(entry).encode())]}


def test_a_rounds_look_ups_are_read_in_one_wave_per_offset_of_a_partition_and_each_finds_its_original(dc1, topics):
    topic = unique("returned.")
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, partitions=3)
    produce(dc1.bootstrap, topic, (_record(p, o) for p in range(3) for o in range(7)))
    returned = _CountedWaves(ClusterConfig("dc1", dc1.bootstrap), H, "dc2-id")
    try:
        looks = {(topic, p, o, "back") for p in range(3) for o in (0, 3, 5, 6, 7)} | {(topic, 0, 1, "elsewhere")}
        found = returned.originals(looks, {(topic, p): 7 for p in range(3)})
        wanted = {(topic, p, o, "back"): 100 + o if o < 5 else None for p in range(3) for o in (0, 3, 5, 6, 7)}
        assert found == {**wanted, (topic, 0, 1, "elsewhere"): None}
        # partition 0 has five offsets to read (0, 1, 3, 5, 6); the log end is known empty
        assert returned.waves == 5
        # a record never changes: what it said is not read again
        assert returned.originals({(topic, 1, 3, "back")}) == {(topic, 1, 3, "back"): 103}
        assert returned.waves == 5
        # without the log end, a look-up there is read and finds the end of the partition
        assert returned.originals({(topic, 2, 7, "back")}) == {(topic, 2, 7, "back"): None}
        assert returned.waves == 6
    finally:
        returned.close()
