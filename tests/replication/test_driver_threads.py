"""A driver thread whose loop ends on an error is said, counted and started again, never left
dead while the flow looks alive (pure: the loops are stand-ins)."""

from __future__ import annotations

import threading

from dr_stream.replication.flow_metrics import FlowMetrics
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
