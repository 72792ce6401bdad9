"""The `__consumer_offsets` record rule against hand-built records of every layout, and the
reader against a real broker's commits."""

from __future__ import annotations

import struct

import pytest

from dr_stream.kafka.consumer_offsets_topic import (
    ConsumerOffsetsTopic,
    OffsetCommitRecord,
    Undecodable,
    decode_offset_commit,
)
from dr_stream.kafka.group_offsets import Committed


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _compact_string(text: str) -> bytes:
    data = text.encode()
    assert len(data) + 1 < 128  # one varint byte is enough here
    return bytes([len(data) + 1]) + data


def commit_key(group: str, topic: str, partition: int, version: int = 1) -> bytes:
    return struct.pack(">h", version) + _string(group) + _string(topic) + struct.pack(">i", partition)


def commit_value(offset: int, metadata: str, version: int) -> bytes:
    head = struct.pack(">hq", version, offset)
    if version >= 3:
        head += struct.pack(">i", 7)  # leader epoch
    body = _compact_string(metadata) if version >= 4 else _string(metadata)
    tail = struct.pack(">q", 1_700_000_000_000)
    if version == 1:
        tail += struct.pack(">q", -1)  # expiry
    if version >= 4:
        tail += b"\x00"  # no tagged fields
    return head + body + tail


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_offset_commit_value_layout_gives_offset_and_metadata(version):
    record = decode_offset_commit(commit_key("billing", "orders", 3), commit_value(42, "dr-stream:dc2", version))
    assert record == OffsetCommitRecord("billing", "orders", 3, Committed(42, "dr-stream:dc2"))


def test_a_commit_without_a_value_is_a_deleted_offset():
    assert decode_offset_commit(commit_key("g", "t", 0, version=0), None) == OffsetCommitRecord("g", "t", 0, None)


@pytest.mark.parametrize("key_version", [2, 3, 9])
def test_group_metadata_and_newer_coordinator_records_are_not_offset_commits(key_version):
    key = struct.pack(">h", key_version) + _string("billing")
    assert decode_offset_commit(key, b"\x00\x03anything") is None


@pytest.mark.parametrize("key, value", [
    (None, b""),
    (commit_key("g", "t", 0)[:-2], None),  # partition cut short
    (commit_key("g", "t", 0), struct.pack(">hq", 3, 1)),  # value ends before the metadata
    (commit_key("g", "t", 0), struct.pack(">hq", 5, 1) + _string("") + struct.pack(">q", 0)),  # unknown layout
])
def test_a_record_that_does_not_decode_says_why(key, value):
    with pytest.raises(Undecodable):
        decode_offset_commit(key, value)


def test_a_metadata_string_that_is_not_utf8_is_kept_readable():
    value = struct.pack(">hq", 2, 5) + struct.pack(">h", 2) + b"\xff\xfe" + struct.pack(">q", 0)
    record = decode_offset_commit(commit_key("g", "t", 0), value)
    assert record is not None and record.committed == Committed(5, "\ufffd\ufffd")


@pytest.mark.integration
def test_the_reader_follows_a_real_brokers_commits_from_the_start_then_only_new_ones(dc1):
    from dr_stream.kafka.group_offsets.consumer_groups import commit_offsets, delete_group
    from tests.kafka_tools import admin, create_topic, delete_topics, unique, wait_until

    topic, first, second = unique("cot."), unique("cot-a-"), unique("cot-b-")
    create_topic(dc1.bootstrap, topic, partitions=2)
    reader = ConsumerOffsetsTopic(dc1.config)
    seen: dict = {}

    def caught_up(wanted: dict) -> bool:  # a commit reaches the log a moment after it is acknowledged
        for group, positions in reader.catch_up().items():
            seen.setdefault(group, {}).update(positions)
        return all(offsets(seen.get(g, {})) == o for g, o in wanted.items())

    def offsets(positions: dict) -> dict:
        return {where: committed.offset for where, committed in positions.items()}

    try:
        commit_offsets(dc1.config, first, {(topic, 0): 5, (topic, 1): 7}, "app")
        commit_offsets(dc1.config, first, {(topic, 0): 9}, "")
        assert wait_until(lambda: caught_up({first: {(topic, 0): 9, (topic, 1): 7}}), 30)
        # librdkafka commits the metadata with its C string's terminating NUL: the broker keeps that
        assert seen[first][(topic, 1)].metadata.rstrip("\0") == "app"
        seen.clear()
        commit_offsets(dc1.config, second, {(topic, 1): 3}, "dr-stream:x")
        assert wait_until(lambda: caught_up({second: {(topic, 1): 3}}), 30)
        assert seen[second][(topic, 1)].written_by_dr_stream
        assert first not in seen  # only what was committed since the last round
        assert offsets(reader.positions[first]) == {(topic, 0): 9, (topic, 1): 7}
        assert reader.undecodable == 0
    finally:
        reader.close()
        with_admin = admin(dc1.bootstrap)
        delete_group(with_admin, first)
        delete_group(with_admin, second)
        delete_topics(dc1.bootstrap, [topic])


def test_a_reader_catching_up_on_a_long_history_never_reports_a_position_older_than_the_newest(dc1):
    """The topic's newest segments hold every commit in order; a first read cut short by its
    round limit must not pass a group's old commits on as its position."""
    from confluent_kafka import Consumer, TopicPartition

    from dr_stream.kafka.group_offsets.consumer_groups import delete_group
    from tests.kafka_tools import admin, create_topic, delete_topics, unique, wait_until

    topic, group = unique("cot-history."), unique("cot-history-")
    create_topic(dc1.bootstrap, topic, partitions=1)
    committer = Consumer({"bootstrap.servers": dc1.bootstrap, "group.id": group, "enable.auto.commit": False})
    commits = 12_000  # more than one consume takes (10,000), so a round of one consume ends mid-history
    for offset in range(1, commits):
        committer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=True)
        committer.poll(0)
    committer.commit(offsets=[TopicPartition(topic, 0, commits)], asynchronous=False)
    committer.close()
    reader = ConsumerOffsetsTopic(dc1.config, round_limit_s=0.0)  # each round one consume
    reported: list[int] = []
    rounds = 0

    def newest_reported() -> bool:
        nonlocal rounds
        rounds += 1
        found = reader.catch_up().get(group, {})
        if (topic, 0) in found:
            reported.append(found[(topic, 0)].offset)
        return bool(reported) and reported[-1] == commits

    try:
        assert wait_until(newest_reported, 60)
        assert reported == [commits], f"older positions passed on before the newest: {reported[:5]}"
        assert reader.caught_up and reader.complete
    finally:
        reader.close()
        delete_group(admin(dc1.bootstrap), group)
        delete_topics(dc1.bootstrap, [topic])
