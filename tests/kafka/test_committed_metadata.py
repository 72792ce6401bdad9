"""Committed offsets whose metadata librdkafka hands back garbled are read again, and never
taken for dr-stream's own commit (a pure rule: the reads are given as lists)."""

from __future__ import annotations

from dr_stream.kafka.group_offsets import Committed
from dr_stream.kafka.group_offsets.consumer_groups import METADATA_READS, UNREADABLE_METADATA, committed_readably


class Read:
    """A committed offset as librdkafka returns it; `metadata` fails to decode when garbled."""

    def __init__(self, topic: str, partition: int, offset: int, metadata: str | None, error=None) -> None:
        self.topic, self.partition, self.offset, self._metadata, self.error = topic, partition, offset, metadata, error

    @property
    def metadata(self) -> str:
        if self._metadata is None:
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
        return self._metadata


def reads(*rounds: list[Read]):
    answers = iter(rounds)
    calls: list[int] = []

    def read() -> list[Read]:
        calls.append(1)
        return next(answers)

    return read, calls


def test_a_garbled_metadata_is_read_again_and_the_second_read_is_kept():
    read, calls = reads([Read("t", 0, 5, None), Read("t", 1, 7, "app")],
                        [Read("t", 0, 5, "dr-stream:flow"), Read("t", 1, 7, "app")])
    found, unreadable = committed_readably(read)
    assert found == {("t", 0): Committed(5, "dr-stream:flow"), ("t", 1): Committed(7, "app")}
    assert found[("t", 0)].written_by_dr_stream
    assert unreadable == [] and len(calls) == 2


def test_a_metadata_that_never_decodes_keeps_its_offset_as_a_consumers_own_and_is_named():
    read, calls = reads(*[[Read("t", 0, 5, None)]] * METADATA_READS)
    found, unreadable = committed_readably(read)
    assert found == {("t", 0): Committed(5, UNREADABLE_METADATA)}
    assert not found[("t", 0)].written_by_dr_stream
    assert unreadable == [("t", 0)] and len(calls) == METADATA_READS


def test_readable_offsets_are_read_once_and_partitions_without_an_offset_are_left_out():
    read, calls = reads([Read("t", 0, 5, ""), Read("t", 1, -1001, ""), Read("t", 2, 3, "", error="x")])
    assert committed_readably(read) == ({("t", 0): Committed(5, "")}, [])
    assert len(calls) == 1
