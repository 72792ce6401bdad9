"""Where a consumed record sits: its topic, partition and offset, typed as what they are.

confluent-kafka types a message's topic, partition and offset as optional, since an event that
is no record (an error a consumer reports in place of a record) may lack them. A record, and a
partition-end event, always has all three; these say so once, and fail loudly on an event that
has not, instead of every reader checking for `None`.
"""

from __future__ import annotations

from typing import cast

from confluent_kafka import TIMESTAMP_CREATE_TIME, Message


def topic_partition(message: Message) -> tuple[str, int]:
    topic, partition = message.topic(), message.partition()
    if topic is None or partition is None:
        raise ValueError(f"a consumed event without a topic or partition: {message.error()}")
    return topic, partition


def offset(message: Message) -> int:
    at = message.offset()
    if at is None:
        raise ValueError(f"a consumed event without an offset: {message.error()}")
    return at


def place(message: Message) -> tuple[str, int] | None:
    """(topic, partition), or None for an event that names none (a consumer-wide error)."""
    topic, partition = message.topic(), message.partition()
    return None if topic is None or partition is None else (topic, partition)


def timestamp(message: Message) -> int:
    """The record's timestamp in ms (CreateTime or LogAppendTime, whichever the topic keeps)."""
    return message.timestamp()[1]


def producer_time(message: Message) -> int | None:
    """The record's timestamp when it is the producer's (CreateTime); None when the topic stamps
    the time it appended the record, which a copy does not share with its original."""
    kind, at = message.timestamp()
    return at if kind == TIMESTAMP_CREATE_TIME else None


def same_producer_time(a: int | None, b: int | None) -> bool:
    """Whether a record and its supposed copy agree on the producer's time: a copy keeps it, so
    they must, unless one side does not keep it (an append-time topic)."""
    return a is None or b is None or a == b


def headers(message: Message) -> list[tuple[str, bytes | None]]:
    """The record's headers in order; a consumed record's are always a list of (name, bytes)."""
    return cast(list[tuple[str, bytes | None]], message.headers() or [])
