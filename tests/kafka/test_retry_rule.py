"""Which errors are asked again, and the waits between: Kafka's Java client decides (its list is
generated into `retriable_errors.py` and kept equal here), a missing topic is an answer."""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka import KafkaError, KafkaException

from dr_stream.kafka.retriable_errors import RETRIABLE_CODES
from dr_stream.kafka.retry_rule import error_name, is_retriable, wait_before, worth_another


def test_the_errors_of_a_broker_that_just_restarted_are_retriable():
    for code in (KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                 KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR, KafkaError.REQUEST_TIMED_OUT,
                 KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
        assert is_retriable(KafkaException(KafkaError(code))), KafkaError(code).name()


def test_a_refusal_or_a_wrong_request_is_not_retried():
    for code in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
                 KafkaError.INVALID_REQUEST, KafkaError._AUTHENTICATION, KafkaError.GROUP_ID_NOT_FOUND):
        assert not is_retriable(KafkaException(KafkaError(code))), KafkaError(code).name()
    assert not is_retriable(ValueError("not a Kafka error"))


def test_a_topic_the_cluster_does_not_know_is_an_answer_not_a_wait():
    assert KafkaError.UNKNOWN_TOPIC_OR_PART in RETRIABLE_CODES  # Kafka's client would wait
    assert not is_retriable(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))


def test_librdkafkas_own_retriable_flag_is_taken_too():
    assert is_retriable(KafkaError(KafkaError._FAIL, retriable=True))
    assert not is_retriable(KafkaError(KafkaError._FAIL))


def test_errors_are_named_as_kafkas_java_client_names_them():
    assert error_name(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)) == "NOT_LEADER_OR_FOLLOWER"
    assert error_name(KafkaException(KafkaError(KafkaError.UNKNOWN_LEADER_EPOCH))) == "UNKNOWN_LEADER_EPOCH"
    assert error_name(KafkaError(KafkaError._TRANSPORT)) == "NETWORK_EXCEPTION"
    assert error_name(RuntimeError()) == "RuntimeError"


def test_waits_grow_to_a_second_and_stop_when_time_runs_out():
    assert [wait_before(n) for n in (1, 2, 3, 4, 5, 9)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert worth_another(1, 5.0)
    assert not worth_another(5, 1.1)


@pytest.mark.integration
def test_the_retriable_list_equals_what_kafkas_java_client_says():
    from tools.retriable_errors import java_list, render

    try:
        found = java_list()
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"the Java list did not print: {exc.stderr}")
    assert found == RETRIABLE_CODES, "run `python -m tools.retriable_errors`"
    assert render(found) == open("dr_stream/kafka/retriable_errors.py").read()
