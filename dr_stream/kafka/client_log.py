"""librdkafka's log lines, routed through Python `logging` and summarised.

A client pointed at a cluster that is down logs every reconnect attempt (`%3|...|FAIL|...`),
once per broker per backoff, for as long as it lives. Printed raw, that buries what the
operator is reading. Every client dr-stream builds gets a `ClientLog` instead of librdkafka's
stderr logger; it forwards the lines to the `dr_stream.kafka.<alias>` logger and lets through
at most one line per (cluster, facility) per `every_s`, saying how many it held back.

The rule is `failure_notes.LogSummary`: at most one line per key per period, with the count
of those held back in between.
"""

from __future__ import annotations

import logging

from dr_stream.failure_notes import LogSummary

# librdkafka uses syslog levels; confluent-kafka hands them to the logger as given.
_SYSLOG_TO_LOGGING = {0: logging.CRITICAL, 1: logging.CRITICAL, 2: logging.CRITICAL, 3: logging.ERROR,
                      4: logging.WARNING, 5: logging.INFO, 6: logging.INFO, 7: logging.DEBUG}


class ClientLog:
    """The `logger` a confluent-kafka client is given: librdkafka's lines for one cluster."""

    def __init__(self, alias: str, summary: LogSummary) -> None:
        self.logger = logging.getLogger(f"dr_stream.kafka.{alias}")
        self.alias, self.summary = alias, summary

    def log(self, level: int, fmt: str, *args: object) -> None:
        python_level = _SYSLOG_TO_LOGGING.get(level, logging.INFO)
        if not self.logger.isEnabledFor(python_level):
            return
        # confluent-kafka calls log(level, "%s [%s] %s", facility, client name, message)
        facility = str(args[0]) if args else ""
        emit, held = self.summary.admit(f"{self.alias}:{facility}")
        if emit:
            suffix = f" ({held} similar lines held back)" if held else ""
            self.logger.log(python_level, f"{self.alias}: {fmt % args if args else fmt}{suffix}")


_SUMMARY = LogSummary()
_LOGS: dict[str, ClientLog] = {}


def client_log(alias: str) -> ClientLog:
    """The shared log of a cluster's clients (one summary across all of them)."""
    if alias not in _LOGS:
        _LOGS[alias] = ClientLog(alias, _SUMMARY)
    return _LOGS[alias]
