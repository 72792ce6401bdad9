"""An admin request's items that failed retriably are asked again, together, until they answer
or the caller's time runs out; the caller's futures complete once, with the final answer, and
a final error names its cluster and call. (The request is a function returning futures here;
the clients themselves meet real restarting brokers in `tests/operations/test_restarting_cluster.py`.)"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException

from dr_stream.kafka.retrying_clients import _Retried, retried_call
from dr_stream.kafka.waits import Waits


def _done(value=None, code: int | None = None) -> Future:
    future: Future = Future()
    if code is None:
        future.set_result(value)
    else:
        future.set_exception(KafkaException(KafkaError(code)))
    return future


class Script:
    """Answers each round from a list: item -> error code (or None for an answer)."""

    def __init__(self, rounds: list[dict[str, int | None]]) -> None:
        self.rounds, self.asked, self.lock = rounds, [], threading.Lock()

    def __call__(self, items: list[str], seconds: float) -> dict[str, Future]:
        with self.lock:
            answers = self.rounds[min(len(self.asked), len(self.rounds) - 1)]
            self.asked.append(sorted(items))
        return {i: _done(f"{i}-ok", answers.get(i)) for i in items}


def test_only_the_items_that_failed_retriably_are_asked_again_together():
    script = Script([{"a": None, "b": KafkaError.UNKNOWN_LEADER_EPOCH, "c": KafkaError.NOT_LEADER_FOR_PARTITION},
                     {"b": KafkaError.LEADER_NOT_AVAILABLE}, {}])
    waits = Waits()
    futures = _Retried(script, ["a", "b", "c"], lambda i: i, 10.0, "dc1", "list offsets", waits).futures
    assert {k: f.result(timeout=5) for k, f in futures.items()} == {"a": "a-ok", "b": "b-ok", "c": "c-ok"}
    assert script.asked == [["a", "b", "c"], ["b", "c"], ["b"]]
    [line] = waits.lines()
    assert line.startswith("dc1 was settling") and "UNKNOWN_LEADER_EPOCH" in line and "it settled" in line
    assert waits.lines() == []  # said once


def test_an_error_that_is_not_retriable_is_the_answer_at_once_and_names_its_cluster():
    script = Script([{"a": KafkaError.TOPIC_AUTHORIZATION_FAILED}])
    futures = _Retried(script, ["a"], lambda i: i, 10.0, "dc2", "describe topics", Waits()).futures
    with pytest.raises(KafkaException) as raised:
        futures["a"].result(timeout=5)
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert raised.value.__notes__ == ["cluster dc2, describe topics"]
    assert script.asked == [["a"]]


def test_a_retriable_error_that_outlasts_the_callers_time_is_the_final_answer_before_that_time():
    script = Script([{"a": KafkaError.NOT_COORDINATOR}])
    waits = Waits()
    began = time.monotonic()
    future = _Retried(script, ["a"], lambda i: i, 2.0, "dc1", "describe groups", waits).futures["a"]
    with pytest.raises(KafkaException):
        future.result(timeout=2.0)  # the caller waits no longer than it gave the request
    assert 0.5 < time.monotonic() - began < 2.0
    assert len(script.asked) > 2
    assert "still failing when their time ran out" in waits.lines()[0]


def test_a_blocking_call_is_called_again_while_it_raises_or_answers_a_retriable_error():
    calls = []

    def committed(seconds: float) -> list:
        calls.append(seconds)
        if len(calls) == 1:
            raise KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))
        return ["partial"] if len(calls) == 2 else ["whole"]

    waits = Waits()
    answer = retried_call(committed, 10.0, "dc1", "committed offsets", waits,
                          lambda found: [KafkaException(KafkaError(KafkaError.NOT_COORDINATOR))]
                          if found == ["partial"] else [])
    assert answer == ["whole"] and len(calls) == 3
    assert calls[0] == 10.0 and all(s < 10.0 for s in calls[1:])  # later calls get what is left
    [line] = waits.lines()
    assert "2 request(s) sent again" in line and "after COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR" in line


def test_a_blocking_calls_final_error_names_its_cluster():
    def refused(_: float) -> None:
        raise KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))

    with pytest.raises(KafkaException) as raised:
        retried_call(refused, 10.0, "dc1", "committed offsets", Waits())
    assert raised.value.__notes__ == ["cluster dc1, committed offsets"]
