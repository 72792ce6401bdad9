"""A sync's result carries its outcome as a type; its words are read back only from a
translation log row (`Synced.read`), and read back they equal the result that wrote them."""

from __future__ import annotations

import pytest

from dr_stream.positions.group_sync import decide
from dr_stream.positions.sync_outcome import (
    NOTHING,
    WAITING,
    Synced,
    SyncOutcome,
    ahead,
    failed,
    held,
    not_translated,
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
def test_every_result_decide_makes_reads_back_from_its_text_as_itself(state, current, wanted, force, dry_run,
                                                                     outcome):
    [action] = decide("g", state, 2, current, {("t", 0): wanted}, force, dry_run)
    assert action.outcome is outcome
    assert Synced.read(action.action.text) == action.action
    assert action.wrote == (outcome in (SyncOutcome.COMMITTED, SyncOutcome.REWOUND))


def test_a_failure_and_a_skip_keep_their_reason_and_read_back_with_it():
    for made in (failed("coordinator moved"), not_translated("index gap"), held("STABLE", 2), ahead(9)):
        assert Synced.read(made.text) == made
    assert failed("coordinator moved").reason == "coordinator moved"
    assert failed("coordinator moved").text == "failed: coordinator moved"
    assert not_translated("index gap").reason == "not translated (index gap)"
    assert held("STABLE", 2).held and not ahead(9).held and ahead(9).outcome is SyncOutcome.AHEAD


def test_no_text_and_a_text_no_sync_writes_have_no_outcome():
    assert Synced.read("") == NOTHING and Synced.read(None) == NOTHING
    assert Synced.read(WAITING.text).outcome is None
    assert not NOTHING.failed and not NOTHING.wrote and not NOTHING.held
