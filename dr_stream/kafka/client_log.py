"""librdkafka's log lines, routed through Python `logging` and summarised.

A client pointed at a cluster that is down logs every reconnect attempt (`%3|...|FAIL|...`),
once per broker per backoff, for as long as it lives. Printed raw, that buries what the
operator is reading. Every client dr-stream builds gets a `ClientLog` instead of librdkafka's
stderr logger; it forwards the lines to the `dr_stream.kafka.<alias>` logger and lets through
at most one line per (cluster, facility) per `every_s`, saying how many it held back.

The rule (`LogSummary.admit`) is pure: given a key and the time, whether to emit and how many
were suppressed since the last emitted line.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

# librdkafka uses syslog levels; confluent-kafka hands them to the logger as given.
_SYSLOG_TO_LOGGING = {0: logging.CRITICAL, 1: logging.CRITICAL, 2: logging.CRITICAL, 3: logging.ERROR,
                      4: logging.WARNING, 5: logging.INFO, 6: logging.INFO, 7: logging.DEBUG}


class LogSummary:
    """At most one line per key per `every_s`; counts the lines held back in between."""

    def __init__(self, every_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s, self.clock = every_s, clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def admit(self, key: str) -> tuple[bool, int]:
        """(emit?, lines held back since the last emitted one for this key)."""
        now = self.clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.every_s:
                self._held[key] = self._held.get(key, 0) + 1
                return False, 0
            self._last[key] = now
            if len(self._last) > 1000:  # keys seen once long ago (a flow's lines are mostly unique)
                self._last = {k: t for k, t in self._last.items() if now - t < self.every_s or k in self._held}
            return True, self._held.pop(key, 0)


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


def summarised(log: Callable[[str], None], every_s: float = 60.0) -> Callable[[str], None]:
    """`log`, with a line identical to one logged less than `every_s` ago held back and counted: a
    driver thread retrying against a cluster that is away repeats the same error every second."""
    summary = LogSummary(every_s)

    def emit(message: str) -> None:
        shown, held = summary.admit(message)
        if shown:
            log(message + (f" ({held} identical lines held back)" if held else ""))

    return emit
