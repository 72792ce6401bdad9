"""What a retrying loop says about the things it cannot do: each failure once, and its end once.

The group poller reads every group each round and the translate loop retries a failed sync
every few seconds; printing each failure each round would flood the console with the same line
while hiding when it changed. A subject (a group) is reported when it starts failing or its
cause changes, and once more when an attempt at it succeeds again. When more than `MANY`
subjects start failing with the same cause in one round (a coordinator that times out the
commits of thousands of groups), or recover in one round, they are said in one line that names
the first and counts the others.

Invariants: a subject is said failing at most once per distinct cause in a row; recovery is
said only for a subject that was said failing, and only after an attempt at it succeeded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field


def first_line(error: BaseException | str) -> str:
    """A failure in one line: its message's first non-blank line, else its type's name (a
    `TimeoutError()` from a future says nothing at all)."""
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
