"""`__consumer_timestamps` records: parsing, malformed ones told apart from tombstones."""

from __future__ import annotations

import pytest

from dr_stream.config import ClusterConfig
from dr_stream.offsets.consumer_timestamps import (
    TOMBSTONE,
    UNKNOWN_TIMESTAMP,
    GroupCommit,
    RecordTimestamps,
    parse_commit,
)
from tests.kafka_tools import create_topic, delete_topics, produce, unique

KEY = b'{"group":"g","topic":"t","partition":0}'


def test_a_well_formed_record_parses_to_its_position():
    assert parse_commit(KEY, b'{"offset":9,"timestamp":90}') == GroupCommit("g", "t", 0, 9, 90)


def test_a_record_without_timestamp_has_an_unknown_one():
    assert parse_commit(KEY, b'{"offset":7}') == GroupCommit("g", "t", 0, 7, UNKNOWN_TIMESTAMP)


def test_a_null_value_is_a_tombstone_not_a_malformed_record():
    assert parse_commit(KEY, None) == TOMBSTONE


def test_records_lacking_a_field_or_not_json_or_negative_are_malformed():
    for key, value in [(b"not json", b'{"offset":1}'), (KEY, b"oops"), (b'{"group":"g"}', b'{"offset":1}'),
                       (KEY, b'{"offset":-3,"timestamp":1}'), (b'[1,2]', b'{"offset":1}'), (None, b'{"offset":1}')]:
        assert parse_commit(key, value) is None, (key, value)


def test_a_commit_is_written_in_the_topic_s_key_and_value_format():
    commit = GroupCommit("g", "t", 3, 42, 1700)
    assert commit.record_key() == b'{"group":"g","topic":"t","partition":3}'
    assert commit.record_value() == b'{"offset":42,"timestamp":1700}'
    assert parse_commit(commit.record_key(), commit.record_value()) == commit


@pytest.mark.integration
def test_record_timestamps_are_read_for_many_partitions_at_once_and_again_at_later_offsets(dc1):
    topic = unique("stamps.")
    create_topic(dc1.bootstrap, topic, partitions=2)
    try:
        produce(dc1.bootstrap, topic, ({"value": b"v", "partition": i % 2, "timestamp": 1_000_000 + i}
                                       for i in range(20)))
        stamps = RecordTimestamps(ClusterConfig("dc1", dc1.bootstrap))
        try:
            assert stamps.of_records({(topic, 0): 2, (topic, 1): 0}) == {(topic, 0): 1_000_004, (topic, 1): 1_000_001}
            # the partitions read last time are read again (a look-up must not leave them paused)
            assert stamps.of_records({(topic, 0): 5, (topic, 1): 9}) == {(topic, 0): 1_000_010, (topic, 1): 1_000_019}
            assert stamps.of_records({(topic, 0): 10}, timeout=1.0) == {}  # past the log end: left out
        finally:
            stamps.close()
    finally:
        delete_topics(dc1.bootstrap, [topic])
