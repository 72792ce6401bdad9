"""A position is forgotten once every read of the source's committed offsets has lacked it for
the set delay; a source that did not answer for a group is never evidence."""

from __future__ import annotations

from dr_stream.positions.gone_positions import GonePositions, SourceGroups

A, B = ("g1", "t", 0), ("g2", "t", 0)


def _read(at: float, offsets: dict[str, set[tuple[str, int]]], unread: set[str] = frozenset()) -> SourceGroups:
    return SourceGroups({g: frozenset(p) for g, p in offsets.items()}, frozenset(unread), at)


def test_a_position_absent_from_every_read_for_the_delay_is_gone_once():
    gone = GonePositions(after_s=10)
    assert gone.gone({A, B}, _read(0, {"g1": {("t", 0)}})) == set()
    assert gone.gone({A, B}, _read(9, {"g1": {("t", 0)}})) == set()
    assert gone.gone({A, B}, _read(10, {"g1": {("t", 0)}})) == {B}
    assert gone.absent_since == {}


def test_a_position_seen_again_starts_its_delay_over():
    gone = GonePositions(after_s=10)
    gone.gone({A}, _read(0, {}))
    gone.gone({A}, _read(5, {"g1": {("t", 0)}}))
    assert gone.gone({A}, _read(12, {})) == set()
    assert gone.gone({A}, _read(22, {})) == {A}


def test_a_group_that_was_not_read_keeps_its_positions():
    gone = GonePositions(after_s=0)
    assert gone.gone({A, B}, _read(0, {}, unread={"g1"})) == {B}


def test_a_deleted_topic_s_partition_is_gone_while_the_group_stays():
    gone = GonePositions(after_s=0)
    assert gone.gone({A, ("g1", "deleted", 3)}, _read(0, {"g1": {("t", 0)}})) == {("g1", "deleted", 3)}


def test_only_what_is_still_known_is_remembered_as_absent():
    gone = GonePositions(after_s=10)
    gone.gone({A, B}, _read(0, {}))
    gone.gone({A}, _read(1, {}))  # B forgotten by other means (a newer position replaced it)
    assert set(gone.absent_since) == {A}
