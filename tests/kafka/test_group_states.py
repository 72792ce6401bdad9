"""How one group's describe answer becomes a state or a one-line error."""

from __future__ import annotations

from concurrent.futures import Future

from confluent_kafka import KafkaError, KafkaException

from dr_stream.kafka.group_offsets.consumer_groups import _described


def failed(code: int) -> Future:
    future: Future = Future()
    future.set_exception(KafkaException(KafkaError(code)))
    return future


def test_an_unknown_group_is_absent():
    assert _described("g", failed(KafkaError.GROUP_ID_NOT_FOUND), 1.0) == ("ABSENT", 0)


def test_a_describe_librdkafka_timed_out_says_which_group_waited_and_how_long():
    found = _described("g", failed(KafkaError._TIMED_OUT), 2.0)
    assert isinstance(found, TimeoutError)
    assert str(found) == "group g: no coordinator answered its describe within 2 s"


def test_another_error_is_returned_without_the_frames_that_would_keep_the_client_alive():
    found = _described("g", failed(KafkaError.NOT_COORDINATOR), 1.0)
    assert isinstance(found, KafkaException)
    assert found.args[0].code() == KafkaError.NOT_COORDINATOR
    assert found.__traceback__ is None
