"""What a group sync did with one partition: an outcome for code, a text for people.

The text is what `failover` prints, `--json` carries and the translation log keeps, so its words
stay as they have always been; code decides on the outcome, never on the text. The texts are
built here and read back here (`SyncOutcome.of`, for a translation log row or a command's result).
"""

from __future__ import annotations

from enum import Enum
from functools import lru_cache


class SyncOutcome(Enum):
    """Each member's value is how its text begins."""

    COMMITTED = "committed"
    REWOUND = "rewound (--force)"
    UNCHANGED = "unchanged"
    WOULD_COMMIT = "would commit"
    WOULD_REWIND = "would rewind (--force)"
    HELD = "skipped: group is "  # members run the group on the destination: it is left alone
    AHEAD = "skipped: destination is ahead"  # never moved backwards unless forced
    NOT_TRANSLATED = "skipped: not translated"
    FAILED = "failed"

    @classmethod
    def of(cls, action: str) -> SyncOutcome | None:
        """The outcome a text says; None for no text (nothing synced yet) or one no sync writes."""
        return _outcome_of(action)

    @property
    def wrote(self) -> bool:
        return self in (SyncOutcome.COMMITTED, SyncOutcome.REWOUND)

    @property
    def label(self) -> str:
        """The metric label: a few fixed words, never the free text."""
        return _LABELS.get(self, "other")


_LABELS = {SyncOutcome.COMMITTED: "committed", SyncOutcome.REWOUND: "rewound", SyncOutcome.UNCHANGED: "unchanged",
           SyncOutcome.HELD: "skipped_active", SyncOutcome.AHEAD: "skipped_ahead",
           SyncOutcome.NOT_TRANSLATED: "not_translated", SyncOutcome.FAILED: "failed"}


def held_text(state: str, members: int) -> str:
    return f"{SyncOutcome.HELD.value}{state} on the destination ({members} members)"


def ahead_text(have: int) -> str:
    return f"{SyncOutcome.AHEAD.value} at {have}; not rewound (--force rewinds)"


def not_translated_text(note: str) -> str:
    return f"{SyncOutcome.NOT_TRANSLATED.value} ({note})"


def failed_text(reason: str) -> str:
    return f"{SyncOutcome.FAILED.value}: {reason}"


def failure_reason(action: str) -> str:
    """Why a failed sync failed (its text after `failed: `)."""
    return action.removeprefix(f"{SyncOutcome.FAILED.value}: ")


def skipped_because(action: str) -> str:
    """Why a skipped sync was skipped (its text after `skipped: `)."""
    return action.removeprefix("skipped: ")


@lru_cache(maxsize=1024)
def _outcome_of(action: str) -> SyncOutcome | None:
    # A failover asks about each of 10,000 positions twice, and their texts are few.
    return next((outcome for outcome in SyncOutcome if action.startswith(outcome.value)), None)
