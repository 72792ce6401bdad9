"""Which Kafka errors a request is sent again for, and how long to wait before it.

A DR tool is used when brokers have just restarted, failed over or moved leaders, and for a
moment after that they answer a request with an error that only means "not yet": a leader epoch
newer than the broker's, a leader not elected, a coordinator loading its log. Kafka's Java client
decides which errors those are (`retriable_errors.RETRIABLE_CODES`, generated from it); librdkafka
flags some errors itself (`KafkaError.retriable`), and its own local errors have Java twins: a
connection that broke is Java's NETWORK_EXCEPTION, a request that timed out its
REQUEST_TIMED_OUT, every broker down the state in which Java's client simply keeps connecting.

One exception to Kafka's list: a topic or partition the cluster does not know is an answer to
dr-stream (a topic deleted, or not created yet), never a reason to wait out a deadline.

Invariants: the rule is pure; an error is retried only while the time the caller gave the call
has room for the next wait; waits grow from `FIRST_WAIT_S` to `LONGEST_WAIT_S`.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from dr_stream.kafka.retriable_errors import RETRIABLE_CODES

# librdkafka's local errors (negative codes) and the Java client's protocol error they stand for.
_LOCAL_TWINS = {
    KafkaError._TRANSPORT: "NETWORK_EXCEPTION",
    KafkaError._ALL_BROKERS_DOWN: "NETWORK_EXCEPTION",
    KafkaError._TIMED_OUT: "REQUEST_TIMED_OUT",
    KafkaError._WAIT_COORD: "COORDINATOR_NOT_AVAILABLE",
    # an admin ListOffsets before the cluster knows the partitions' leaders ("No leaders found")
    KafkaError._NOENT: "LEADER_NOT_AVAILABLE",
}

# Retriable to Kafka's client, but an answer to dr-stream's calls (the topic is not there).
ANSWERS = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION})

FIRST_WAIT_S = 0.1
LONGEST_WAIT_S = 1.0


def kafka_error(error: BaseException | KafkaError | None) -> KafkaError | None:
    """The KafkaError an exception carries, if it carries one."""
    if isinstance(error, KafkaError):
        return error
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        return error.args[0]
    return None


def is_retriable(error: BaseException | KafkaError | None) -> bool:
    """Whether sending the same request again may succeed once the cluster has settled."""
    found = kafka_error(error)
    if found is None or found.code() in ANSWERS:
        return False
    return found.code() in RETRIABLE_CODES or found.code() in _LOCAL_TWINS or found.retriable()


def error_name(error: BaseException | KafkaError) -> str:
    """The error as Kafka's Java client names it (NOT_LEADER_OR_FOLLOWER, not librdkafka's
    NOT_LEADER_FOR_PARTITION), else librdkafka's name, else the exception's type."""
    found = kafka_error(error)
    if found is None:
        return type(error).__name__
    return RETRIABLE_CODES.get(found.code()) or _LOCAL_TWINS.get(found.code()) or found.name()


def wait_before(attempt: int) -> float:
    """Seconds to wait before sending a request again for the `attempt`-th time (1, 2, ...)."""
    return float(min(LONGEST_WAIT_S, FIRST_WAIT_S * 2 ** max(0, attempt - 1)))


def worth_another(attempt: int, seconds_left: float) -> bool:
    """Whether the next attempt fits in the time left: its wait, and a moment for the request."""
    return seconds_left > wait_before(attempt) + 0.2
