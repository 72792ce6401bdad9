"""librdkafka's log lines: one per cluster and facility per period, with a count of the rest."""

from __future__ import annotations

import logging

from dr_stream.failure_notes import LogSummary
from dr_stream.kafka.client_log import ClientLog


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_first_line_of_a_key_is_emitted_and_repeats_within_the_period_are_held_back():
    clock = Clock()
    summary = LogSummary(every_s=60, clock=clock)
    assert summary.admit("dc1:FAIL") == (True, 0)
    clock.now = 10
    assert summary.admit("dc1:FAIL") == (False, 0)
    assert summary.admit("dc1:FAIL") == (False, 0)
    assert summary.admit("dc2:FAIL") == (True, 0)
    clock.now = 61
    assert summary.admit("dc1:FAIL") == (True, 2)
    assert summary.admit("dc1:FAIL") == (False, 0)


def test_a_client_log_names_the_cluster_and_says_how_many_lines_it_held_back(caplog, monkeypatch):
    clock = Clock()
    log = ClientLog("dc9", LogSummary(every_s=60, clock=clock))
    # Caught at the logger itself, and only there: once a flow in this session set up dr-stream's
    # text format, its lines stop at dr-stream's own root and never reach the one pytest listens at.
    monkeypatch.setattr(log.logger, "propagate", False)
    log.logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.WARNING, logger="dr_stream.kafka.dc9"):
            for _ in range(5):
                log.log(3, "%s [%s] %s", "FAIL", "rdkafka#producer-1", "Connect to 127.0.0.1:1 failed")
            clock.now = 120
            log.log(3, "%s [%s] %s", "FAIL", "rdkafka#producer-1", "Connect to 127.0.0.1:1 failed")
            log.log(7, "%s [%s] %s", "BROKER", "rdkafka#producer-1", "debug chatter")
    finally:
        log.logger.removeHandler(caplog.handler)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "dc9: FAIL [rdkafka#producer-1] Connect to 127.0.0.1:1 failed",
        "dc9: FAIL [rdkafka#producer-1] Connect to 127.0.0.1:1 failed (4 similar lines held back)",
    ]
    assert caplog.records[0].levelno == logging.ERROR
