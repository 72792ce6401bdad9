"""What a retrying loop says about the things it cannot do: each failure once, and its end once.

The group poller reads every group each round and the translate loop retries a failed sync
every few seconds; printing each failure each round would flood the console with the same line
while hiding when it changed. A subject (a group) is reported when it starts failing or its
cause changes, and once more when an attempt at it succeeds again. When more than `MANY`
subjects start failing with the same cause in one round (a coordinator that times out the
commits of thousands of groups), or recover in one round, they are said in one line that names
the first and counts the others.

A loop whose whole round fails (a cluster away) says its error through `summarised`: the same
line at most once a minute, with the count of those held back. Only such failure lines go through
it: a line that says something happened (a query started or restarted, a topic created) is said
each time, even word for word the same as the last one, or an operator counting restarts in the
log is told fewer than there were.

Invariants: a subject is said failing at most once per distinct cause in a row; recovery is
said only for a subject that was said failing, and only after an attempt at it succeeded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


def first_line(error: BaseException | str) -> str:
    """A failure in one line: its message's first non-blank line, else its type's name (a
    `TimeoutError()` from a future says nothing at all). A Kafka client's error is its reason and
    its name, not the `KafkaError{code=...}` its exception prints."""
    cause: Any = error.args[0] if isinstance(error, BaseException) and error.args else None
    if callable(getattr(cause, "str", None)) and callable(getattr(cause, "name", None)):
        return f"{cause.str()} [{cause.name()}]"
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if lines:
        return lines[0]
    return type(error).__name__ if isinstance(error, BaseException) else "unknown cause"


MANY = 3


def _labels(subjects: list[str]) -> list[str]:
    """Each subject on its own, or one label for all of them when there are more than `MANY`."""
    if len(subjects) <= MANY:
        return subjects
    return [f"{subjects[0]} and {len(subjects) - 1:,} more"]


@dataclass
class FailureNotes:
    log: Callable[[str], None]
    # subject, first line of the cause -> the line to print
    failing: Callable[[str, str], str]
    # subject -> the line to print when it works again
    recovered: Callable[[str], str]
    _causes: dict[str, str] = field(default_factory=dict)

    def round(self, failed: dict[str, str], attempted: Iterable[str]) -> None:
        """One round's outcome: `failed` maps each subject that failed to its cause; every other
        subject in `attempted` succeeded."""
        newly: dict[str, list[str]] = {}
        for subject, cause in sorted(failed.items()):
            cause = first_line(cause)
            if self._causes.get(subject) != cause:
                self._causes[subject] = cause
                newly.setdefault(cause, []).append(subject)
        for cause, subjects in newly.items():
            for label in _labels(subjects):
                self.log(self.failing(label, cause))
        healed = [s for s in sorted(set(attempted) - set(failed)) if self._causes.pop(s, None) is not None]
        for label in _labels(healed):
            self.log(self.recovered(label))

    @property
    def subjects(self) -> set[str]:
        """The subjects failing now."""
        return set(self._causes)

    def forget(self, subjects: Iterable[str]) -> None:
        """Subjects that are gone (a group deleted): no longer failing, and never said recovered."""
        for subject in subjects:
            self._causes.pop(subject, None)


def named(subjects: list[str]) -> str:
    """Subjects in one phrase: all of them, or the first and a count of the others."""
    return ", ".join(_labels(subjects))


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


def summarised(log: Callable[[str], None], every_s: float = 60.0) -> Callable[[str], None]:
    """`log` for a retrying loop's failure lines: a line identical to one logged less than `every_s`
    ago is held back and counted, since a loop against a cluster that is away repeats the same
    error every round."""
    summary = LogSummary(every_s)

    def emit(message: str) -> None:
        shown, held = summary.admit(message)
        if shown:
            log(message + (f" ({held} identical lines held back)" if held else ""))

    return emit
