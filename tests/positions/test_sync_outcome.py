"""A sync's outcome is read back from the text it wrote, whatever the detail in that text."""

from __future__ import annotations

import pytest

from dr_stream.positions.group_sync import decide
from dr_stream.positions.sync_outcome import (
    SyncOutcome,
    failed_text,
    failure_reason,
    not_translated_text,
    skipped_because,
)


@pytest.mark.parametrize(("state", "current", "wanted", "force", "dry_run", "outcome"), [
    ("EMPTY", {}, 5, False, False, SyncOutcome.COMMITTED),
    ("EMPTY", {("t", 0): 5}, 5, False, False, SyncOutcome.UNCHANGED),
    ("EMPTY", {("t", 0): 9}, 5, False, False, SyncOutcome.AHEAD),
    ("EMPTY", {("t", 0): 9}, 5, True, False, SyncOutcome.REWOUND),
    ("EMPTY", {("t", 0): 9}, 5, True, True, SyncOutcome.WOULD_REWIND),
    ("DEAD", {}, 5, False, True, SyncOutcome.WOULD_COMMIT),
    ("STABLE", {}, 5, False, False, SyncOutcome.HELD),
])
def test_every_text_decide_writes_reads_back_as_its_outcome(state, current, wanted, force, dry_run, outcome):
    [action] = decide("g", state, 2, current, {("t", 0): wanted}, force, dry_run)
    assert SyncOutcome.of(action.action) is outcome == action.outcome
    assert action.wrote == (outcome in (SyncOutcome.COMMITTED, SyncOutcome.REWOUND))


def test_a_failure_and_a_skip_keep_their_reason_and_no_text_is_no_outcome():
    assert SyncOutcome.of(failed_text("coordinator moved")) is SyncOutcome.FAILED
    assert failure_reason(failed_text("coordinator moved")) == "coordinator moved"
    assert SyncOutcome.of(not_translated_text("index gap")) is SyncOutcome.NOT_TRANSLATED
    assert skipped_because(not_translated_text("index gap")) == "not translated (index gap)"
    assert SyncOutcome.of("") is None
