"""A driver thread whose loop ends on an error is said, counted and started again, never left
dead while the flow looks alive; a query's start runs on a thread of its own that says where it
waits (pure: the loops and starts are stand-ins)."""

from __future__ import annotations

import threading

import pytest

from dr_stream.replication.flow_metrics import FlowMetrics
from dr_stream.replication.query_start import QueryStart
from dr_stream.replication.supervisor import kept_running


def test_a_loop_that_raised_is_said_counted_and_started_again():
    lines: list[str] = []
    calls: list[int] = []
    metrics = FlowMetrics("f", "replicate-f")

    def loop(event: threading.Event) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise TimeoutError()

    kept_running("lag", loop, threading.Event(), lines.append, metrics.thread_failed, pause_s=0)
    assert len(calls) == 2
    assert lines == ["driver thread lag stopped on TimeoutError: TimeoutError; started again in 0 s"]
    failures = {tuple(s.labels.values()): s.value for family in metrics.collect() for s in family.samples
                if s.name == "dr_stream_thread_failures_total"}
    assert failures == {("f", "lag"): 1.0}


def test_a_loop_that_ends_normally_is_not_started_again_and_a_stopped_flow_starts_none():
    calls: list[int] = []
    kept_running("lag", lambda event: calls.append(1), threading.Event(), print, pause_s=0)
    stopped = threading.Event()
    stopped.set()
    kept_running("lag", lambda event: calls.append(1), stopped, print, pause_s=0)
    assert calls == [1]


def test_a_loop_failing_every_time_goes_on_being_retried_until_the_flow_stops_and_says_its_failure_once():
    lines: list[str] = []
    calls: list[int] = []
    stop = threading.Event()

    def loop(event: threading.Event) -> None:
        calls.append(1)
        if len(calls) == 4:
            stop.set()
        raise ValueError("bad sample\n  at ...")

    kept_running("lag", loop, stop, lines.append, pause_s=0)
    # The same failure again within a minute is held back; the fourth came as the flow stopped (its
    # JVM may already be gone): not a fault.
    assert len(calls) == 4
    assert lines == ["driver thread lag stopped on ValueError: bad sample; started again in 0 s"]


def test_a_start_that_has_not_returned_says_where_it_waits_and_hands_over_its_query_once_it_returns():
    released = threading.Event()

    def waits_for_the_gateway() -> str:
        released.wait(5)
        return "the query"

    start = QueryStart("replicate-f", waits_for_the_gateway)
    assert start.wait(0.05) is False and not start.done
    assert "waits_for_the_gateway" in start.where()
    released.set()
    assert start.wait(5) is True
    assert start.result() == "the query"


def test_a_start_that_failed_raises_its_error_to_whoever_takes_the_result():
    def refused() -> str:
        raise TimeoutError("no leader for stress[0]")

    start = QueryStart("replicate-f", refused)
    assert start.wait(5)
    with pytest.raises(TimeoutError, match="no leader"):
        start.result()
