"""An error a command did not handle, as one line an operator can act on, and an exit code.

A DR command is run on a bad day, often by someone who did not write the flow: twenty lines of
Python traceback tell them neither what failed nor what to do, and hide the one line that does.
`describe` (pure) turns any exception into that line: what failed, on which cluster (the note a
client's error carries, `retrying_clients.note_where`), and what to do next; `report` writes the
traceback to a file of its own, for a developer, and names the file in the line.

A cluster that did not answer in time, or whose brokers were all down, is `UNREACHABLE` (the
command may work once it is back); anything else is `FAILED`.

Invariants: the line is a single line; the traceback never reaches the console.
"""

from __future__ import annotations

import datetime as dt
import logging
import tempfile
import traceback
from dataclasses import dataclass

from confluent_kafka import KafkaError

from dr_stream.exit_codes import ExitCode
from dr_stream.failure_notes import first_line
from dr_stream.kafka.retry_rule import error_name, is_retriable, kafka_error

_UNANSWERED = {KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE}


@dataclass(frozen=True)
class Failure:
    code: ExitCode
    line: str


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and the ones it was raised from or during, newest first, each once."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def _where(chain: list[BaseException]) -> str | None:
    for exc in chain:
        for note in getattr(exc, "__notes__", ()):
            if note.startswith("cluster "):
                return str(note)
    return None


def _message(exc: BaseException) -> str:
    """The error's own words: a Kafka error's reason and name, a Java exception's first line
    without py4j's wrapping, else the first line of the message."""
    error = kafka_error(exc)
    if error is not None:
        return f"{error.str()} [{error_name(error)}]"
    java = getattr(exc, "java_exception", None)
    if java is not None:
        return first_line(str(java.toString()))
    return first_line(exc)


def describe(command: str, exc: BaseException) -> Failure:
    chain = _chain(exc)
    where = _where(chain)
    error = next((kafka_error(e) for e in chain if kafka_error(e) is not None), None)
    place = f" ({where})" if where else ""
    what = f"dr-stream: {command}: {_message(exc)}{place}"
    if error is not None and (error.code() in _UNANSWERED or is_retriable(error)):
        return Failure(ExitCode.UNREACHABLE,
                       f"{what}; the cluster did not answer or did not settle in time: check its brokers "
                       "(`dr-stream check-config --connect`) and run the command again")
    return Failure(ExitCode.FAILED, f"{what}; the command stopped there: run it again, and if it fails the same "
                                    "way, report it with the traceback")


def report(command: str, exc: BaseException) -> Failure:
    """`describe`, with the traceback written to a file the line names (and to the debug log)."""
    found = describe(command, exc)
    text = "".join(traceback.format_exception(exc))
    logging.getLogger("dr_stream.cli").debug("%s failed:\n%s", command, text)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        # a local file on the machine the command ran on, never the flow's state
        with tempfile.NamedTemporaryFile("w", prefix=f"dr-stream-{command}-{stamp}-", suffix=".traceback",
                                         delete=False) as out:
            out.write(text)
    except OSError:
        return found
    return Failure(found.code, f"{found.line} (traceback: {out.name})")
