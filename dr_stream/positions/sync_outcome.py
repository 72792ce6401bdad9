"""What a group sync did with one partition: an outcome for code, a text for people.

A sync's result travels as a `Synced`: code decides on its `outcome` (and its `reason`), never on
its words, and the words are rendered once, when the result is made. The text is what `failover`
prints, `--json` carries and the translation log keeps, so its words stay as they have always
been. Text is read back into an outcome in one place only, `Synced.read`: a translation log row
taken back when a flow starts.
"""

from __future__ import annotations

from dataclasses import dataclass
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

    @property
    def wrote(self) -> bool:
        return self in (SyncOutcome.COMMITTED, SyncOutcome.REWOUND)

    @property
    def label(self) -> str:
        """The metric label: a few fixed words, never the free text."""
        return _LABELS.get(self, "other")


# the outcomes whose text says why it was skipped after this
_SKIPPED = frozenset({SyncOutcome.HELD, SyncOutcome.AHEAD, SyncOutcome.NOT_TRANSLATED})
_SKIPPED_PREFIX = "skipped: "
_LABELS = {SyncOutcome.COMMITTED: "committed", SyncOutcome.REWOUND: "rewound", SyncOutcome.UNCHANGED: "unchanged",
           SyncOutcome.HELD: "skipped_active", SyncOutcome.AHEAD: "skipped_ahead",
           SyncOutcome.NOT_TRANSLATED: "not_translated", SyncOutcome.FAILED: "failed"}


@dataclass(frozen=True)
class Synced:
    """One partition's sync result. Invariant: `text` begins with `outcome`'s value, and a result
    with no outcome (nothing synced: waiting, sync off, none yet) is none of a sync's texts."""

    outcome: SyncOutcome | None
    text: str

    def __str__(self) -> str:
        return self.text

    @property
    def reason(self) -> str:
        """Why it failed or was skipped (the detail its text carries); empty for the others."""
        if self.outcome is SyncOutcome.FAILED:
            return self.text.removeprefix(f"{SyncOutcome.FAILED.value}: ")
        if self.outcome in _SKIPPED:
            return self.text.removeprefix(_SKIPPED_PREFIX)
        return ""

    @property
    def wrote(self) -> bool:
        return self.outcome is not None and self.outcome.wrote

    @property
    def failed(self) -> bool:
        return self.outcome is SyncOutcome.FAILED

    @property
    def held(self) -> bool:
        """Members run the group on the destination: it was left alone."""
        return self.outcome is SyncOutcome.HELD

    @classmethod
    def read(cls, text: str | None) -> Synced:
        """The result a text says (a translation log row's `action`): the one place words are read
        back; a text no sync writes has no outcome."""
        return _read(text or "")


def _simple(outcome: SyncOutcome) -> Synced:
    return Synced(outcome, outcome.value)


COMMITTED = _simple(SyncOutcome.COMMITTED)
REWOUND = _simple(SyncOutcome.REWOUND)
UNCHANGED = _simple(SyncOutcome.UNCHANGED)
WOULD_COMMIT = _simple(SyncOutcome.WOULD_COMMIT)
WOULD_REWIND = _simple(SyncOutcome.WOULD_REWIND)
NOTHING = Synced(None, "")  # no sync yet
NOT_SYNCED = Synced(None, "not synced (sync_to_destination off)")
WAITING = Synced(None, "waiting")  # a share group's position not translated yet


def held(state: str, members: int) -> Synced:
    return Synced(SyncOutcome.HELD, f"{SyncOutcome.HELD.value}{state} on the destination ({members} members)")


def ahead(have: int) -> Synced:
    return Synced(SyncOutcome.AHEAD, f"{SyncOutcome.AHEAD.value} at {have}; not rewound (--force rewinds)")


def not_translated(note: str | None) -> Synced:
    return Synced(SyncOutcome.NOT_TRANSLATED, f"{SyncOutcome.NOT_TRANSLATED.value} ({note})")


def failed(reason: str) -> Synced:
    return Synced(SyncOutcome.FAILED, f"{SyncOutcome.FAILED.value}: {reason}")


@lru_cache(maxsize=1024)
def _read(text: str) -> Synced:
    # A flow taking back 10,000 positions reads few distinct texts.
    return Synced(next((o for o in SyncOutcome if text.startswith(o.value)), None), text)
