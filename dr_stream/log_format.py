"""Where dr-stream's own lines go: Python `logging`, as text for people or JSON lines for shippers.

A flow's lines log to `dr_stream.flow.<flow name>`, the Kafka clients' summarised lines to
`dr_stream.kafka.<cluster alias>` (`kafka.client_log`). Text shows a flow line as
`[<flow>] <message>` and any other as `<LEVEL> <logger>: <message>`; JSON writes one object per
line with `time` (UTC, ISO 8601), `level`, `logger`, `flow` when there is one, and `message`.
Lines go to whatever `sys.stdout` is when they are written.

Invariant: configuring again replaces the handler, never adds a second one (a line is never
printed twice).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

FORMATS = ("text", "json")
_ROOT = "dr_stream"
_FLOW = "dr_stream.flow."


def _flow(record: logging.LogRecord) -> str | None:
    return record.name[len(_FLOW):] if record.name.startswith(_FLOW) else None


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        flow, message = _flow(record), record.getMessage()
        return f"[{flow}] {message}" if flow else f"{record.levelname} {record.name}: {message}"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, str] = {"time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
                "level": record.levelname, "logger": record.name}
        if flow := _flow(record):
            line["flow"] = flow
        line["message"] = record.getMessage()
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line)


class _CurrentStdout(logging.StreamHandler[Any]):
    """Writes to the `sys.stdout` of the moment (a test's capture, a redirect), not the one at start."""

    @property
    def stream(self) -> TextIO:
        return sys.stdout

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


class JvmGone(logging.Filter):
    """Drops py4j's own report of a call that failed because the JVM had gone away (it exits
    first when a signal reaches the whole process group): py4j prints it as a traceback, on the
    root logger or its own, and raises the same error to the caller, which says in one line
    what it means for the flow, or nothing while the flow stops."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        while error is not None:
            if isinstance(error, ConnectionError) or type(error).__name__ == "Py4JNetworkError":
                return False
            error = error.__cause__ or error.__context__
        return True


_PY4J_LOGGERS = ("", "py4j.java_gateway", "py4j.clientserver")


def configure(fmt: str = "text") -> None:
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r}: expected {' or '.join(FORMATS)}")
    handler = _CurrentStdout()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger(_ROOT)
    root.handlers = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False
    # The Kafka clients' lines are summarised already; below WARNING they are librdkafka's chatter.
    logging.getLogger("dr_stream.kafka").setLevel(logging.WARNING)
    for name in _PY4J_LOGGERS:
        logger = logging.getLogger(name)
        logger.filters = [f for f in logger.filters if not isinstance(f, JvmGone)] + [JvmGone()]


def writes_json() -> bool:
    """Whether dr-stream's lines are JSON now (a line the JVM writes for a flow follows suit)."""
    return any(isinstance(h.formatter, JsonFormatter) for h in logging.getLogger(_ROOT).handlers)


def flow_logger(flow: str) -> logging.Logger:
    """The logger of one flow's lines, configured as text on first use if nothing configured it."""
    if not logging.getLogger(_ROOT).handlers:
        configure("text")
    return logging.getLogger(_FLOW + flow)
