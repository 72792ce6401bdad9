"""What a returned copy must share with the destination record it names (pure)."""

from __future__ import annotations

from dr_stream.positions.returned_records import Likeness, content_digest


def like(key: bytes | None, value: bytes | None, producer_time: int | None) -> Likeness:
    return Likeness(content_digest(key), content_digest(value), producer_time)


def test_a_copy_is_like_its_original_when_key_value_and_producer_time_agree():
    assert like(b"k", b"v", 5).matches(like(b"k", b"v", 5))


def test_another_key_value_or_producer_time_is_another_record():
    assert not like(b"k", b"v", 5).matches(like(b"k", b"w", 5))
    assert not like(b"k", b"v", 5).matches(like(b"j", b"v", 5))
    assert not like(b"k", b"v", 5).matches(like(b"k", b"v", 6))


def test_a_topic_that_stamps_the_append_time_compares_key_and_value_only():
    assert like(b"k", b"v", None).matches(like(b"k", b"v", 5))
    assert like(b"k", b"v", 5).matches(like(b"k", b"v", None))


def test_a_missing_key_or_value_is_not_an_empty_one():
    assert not like(None, b"v", 5).matches(like(b"", b"v", 5))
    assert not like(b"k", None, 5).matches(like(b"k", b"", 5))
    assert like(None, None, 5).matches(like(None, None, 5))


def test_the_loss_checks_read_records_by_the_same_rule():
    """A source record and its copy read back (`record_reads`, the loss and hold checks): an
    append-time destination gives the copy its own time, and it is still the same record."""
    from dr_stream.kafka.record_reads import ReadRecord

    source = ReadRecord(b"k", b"v", 2, producer_time=5)
    assert source.same_as(ReadRecord(b"k", b"v", 2, producer_time=None))
    assert source.same_as(ReadRecord(b"k", b"v", 2, producer_time=5))
    assert not source.same_as(ReadRecord(b"k", b"v", 2, producer_time=6))
    assert not source.same_as(ReadRecord(b"k", b"w", 2, producer_time=None))
