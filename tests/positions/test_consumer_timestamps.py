"""`__consumer_timestamps` records as written, the topic as the flow makes it (compacted, its
segments rolled often enough for compaction to keep it near a record per position), and the
timestamps of the records positions point at.

(The topic is read only by the translate query, through the JVM: tests/test_contracts.py and
tests/positions/test_position_records.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from dr_stream.core.config import ClusterConfig
from dr_stream.core.contracts import CONSUMER_TIMESTAMPS_TOPIC
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.positions.consumer_timestamps import (
    CONFIGS,
    UNKNOWN_TIMESTAMP,
    GroupCommit,
    RecordTimestamps,
    ensure_topic,
    read_spans,
    settle_topic,
)
from tests.kafka_tools import admin, create_topic, delete_topics, produce, topic_config, unique


def test_a_commit_is_written_in_the_topic_s_key_and_value_format():
    commit = GroupCommit("g", "t", 3, 42, 1700)
    assert commit.record_key() == b'{"group":"g","topic":"t","partition":3}'
    assert commit.record_value() == b'{"offset":42,"timestamp":1700}'


def test_wanted_records_close_together_are_read_as_one_span_and_far_ones_apart():
    assert read_spans([3, 5, 9, 510, 1100], max_gap=500) == [(3, 510), (1100, 1100)]
    assert read_spans([7], max_gap=0) == [(7, 7)]
    assert read_spans([1, 2, 4], max_gap=0) == [(1, 2), (4, 4)]
    assert read_spans([], max_gap=10) == []


@contextmanager
def _stamped_topic(dc1, prefix: str, records: int) -> Iterator[tuple[str, RecordTimestamps]]:
    """A topic of 2 partitions holding `records` records (record i on partition i % 2, stamped
    1_000_000 + i), and a reader of its timestamps; both gone afterwards."""
    topic = unique(prefix)
    # Records stamped in 1970 are past any time retention: without retention.ms=-1 the broker's
    # next retention check (every 60 s) deletes them between two look-ups of the same test.
    create_topic(dc1.bootstrap, topic, partitions=2, config={"retention.ms": "-1"})
    try:
        produce(dc1.bootstrap, topic, ({"value": b"v", "partition": i % 2, "timestamp": 1_000_000 + i}
                                       for i in range(records)))
        stamps = RecordTimestamps(ClusterContext(ClusterConfig("dc1", dc1.bootstrap)))
        try:
            yield topic, stamps
        finally:
            stamps.close()
    finally:
        delete_topics(dc1.bootstrap, [topic])


@pytest.mark.integration
def test_the_records_before_many_groups_positions_are_read_in_one_pass_each_unreadable_one_unknown(dc1):
    with _stamped_topic(dc1, "before.", 2000) as (topic, stamps):
        # partition 0 holds even i at offset i // 2; offsets 1, 3 and 900 are read as spans
        wanted = {(topic, 0, 2), (topic, 0, 4), (topic, 0, 901), (topic, 1, 1), (topic, 1, 0), (topic, 1, 5000)}
        assert stamps.before_each(wanted) == {
            (topic, 0, 2): 1_000_002, (topic, 0, 4): 1_000_006, (topic, 0, 901): 1_001_800,
            (topic, 1, 1): 1_000_001, (topic, 1, 0): UNKNOWN_TIMESTAMP, (topic, 1, 5000): UNKNOWN_TIMESTAMP}
        assert stamps.before_each({(topic, 0, 1)}) == {(topic, 0, 1): 1_000_000}  # nothing left paused


@pytest.mark.integration
def test_record_timestamps_are_read_for_many_partitions_at_once_and_again_at_later_offsets(dc1):
    with _stamped_topic(dc1, "stamps.", 20) as (topic, stamps):
        assert stamps.of_records({(topic, 0): 2, (topic, 1): 0}) == {(topic, 0): 1_000_004, (topic, 1): 1_000_001}
        # the partitions read last time are read again (a look-up must not leave them paused)
        assert stamps.of_records({(topic, 0): 5, (topic, 1): 9}) == {(topic, 0): 1_000_010, (topic, 1): 1_000_019}
        assert stamps.of_records({(topic, 0): 10}, timeout=1.0) == {}  # past the log end: left out


@pytest.mark.integration
def test_the_topic_rolls_its_segments_every_few_minutes_so_compaction_can_take_them(dc1):
    ensure_topic(admin(dc1.bootstrap))
    settle_topic(admin(dc1.bootstrap))  # made by an older release in an earlier test run: given them now

    found = topic_config(dc1.bootstrap, CONSUMER_TIMESTAMPS_TOPIC)

    assert {k: found.get(k) for k in CONFIGS} == CONFIGS and int(found["segment.ms"]) <= 10 * 60 * 1000
    assert settle_topic(admin(dc1.bootstrap)) == {}
