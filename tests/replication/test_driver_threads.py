"""A driver thread whose loop ends on an error is said, counted and started again, never left
dead while the flow looks alive (pure: the loops are stand-ins)."""

from __future__ import annotations

import threading

from dr_stream.replication.flow_metrics import FlowMetrics
from dr_stream.replication.supervisor import kept_running, slow_start_watch


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


def test_a_loop_failing_every_time_goes_on_being_retried_until_the_flow_stops_and_its_failure_at_the_stop_is_not_said():
    lines: list[str] = []
    stop = threading.Event()

    def loop(event: threading.Event) -> None:
        if len(lines) == 3:
            stop.set()
        raise ValueError("bad sample\n  at ...")

    kept_running("lag", loop, stop, lines.append, pause_s=0)
    # The fourth failure came as the flow stopped (its JVM may already be gone): not a fault.
    assert lines == ["driver thread lag stopped on ValueError: bad sample; started again in 0 s"] * 3


def test_a_start_that_does_not_return_is_said_with_where_the_supervisor_waits():
    lines: list[str] = []
    released = threading.Event()

    def waits_for_the_gateway() -> None:
        watch = slow_start_watch("replicate-f", lines.append, after_s=0.05)
        try:
            released.wait(5)
        finally:
            watch.cancel()

    starting = threading.Thread(target=waits_for_the_gateway)
    starting.start()
    try:
        for _ in range(100):
            if lines:
                break
            threading.Event().wait(0.02)
    finally:
        released.set()
        starting.join()
    assert len(lines) == 1, lines
    assert lines[0].startswith("replicate-f: its start has not returned after 0.05 s; the supervisor waits at ")
    assert "waits_for_the_gateway" in lines[0]


def test_a_start_that_returns_in_time_says_nothing():
    lines: list[str] = []
    slow_start_watch("replicate-f", lines.append, after_s=0.2).cancel()
    threading.Event().wait(0.3)
    assert lines == []
