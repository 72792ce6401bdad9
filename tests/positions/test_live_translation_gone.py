"""A running translation forgets the positions the source's committed offsets have lacked for
`gone.after_s`: out of every map, the metric series read from them, and the translation log
(a `gone` row), while a read that did not answer for a group forgets nothing of it. (The
translator, destination and log are stand-ins; the flow against real brokers is in
`test_offset_translation.py`.)"""

from __future__ import annotations

import time

from dr_stream.core.policy import TopicRenamer
from dr_stream.positions.consumer_timestamps import GroupCommit
from dr_stream.positions.gone_positions import GONE, GonePositions, SourceGroups
from tests.positions.test_live_translation_retry import _Destination, _Translator, loop


class _Renaming(_Translator):
    renamer = TopicRenamer("dc1.${topic}")


def _read(at: float, offsets: dict[str, set[tuple[str, int]]], unread: frozenset[str] = frozenset()) -> SourceGroups:
    return SourceGroups({g: frozenset(p) for g, p in offsets.items()}, unread, at)


def test_a_group_gone_from_the_source_leaves_the_maps_and_the_log_says_so_once():
    lines: list[str] = []
    forgotten: list[set] = []
    translate = loop(_Destination(refusals=0), lines, translator=_Renaming(), gone=GonePositions(after_s=10),
                     on_forgotten=forgotten.append)
    translate.take_batch([GroupCommit("kept", "orders", 0, 40, 1000), GroupCommit("deleted", "orders", 0, 7, 900),
                          GroupCommit("deleted", "orders", 1, 9, 901)])
    assert set(translate.untranslated_ages()) == {"kept", "deleted"}
    live = {"kept": {("orders", 0)}}

    translate.source_groups(_read(100, live))
    translate.step()
    assert len(translate.latest) == 3  # absent once: not gone yet

    translate.source_groups(_read(110, live))
    translate.step()
    assert set(translate.latest) == {("kept", "orders", 0)}
    assert set(translate.untranslated_ages()) == {"kept"}
    assert set(translate._recorded) == {("kept", "orders", 0)}
    assert set(translate.still_for()) == {("kept", "orders", 0)}
    assert translate.totals["forgotten"] == 2 and forgotten == [{("deleted", "orders", 0), ("deleted", "orders", 1)}]
    assert [line for line in lines if "forgotten" in line] == [
        "2 positions forgotten: no committed offset on the source for 10 s (groups deleted: deleted, expired, or "
        "their topics deleted)"]
    translate.write_record()
    gone_rows = [t for t, _ in translate.record.appends[-1]]
    assert [(t.key, t.method, t.source_offset, t.dest_topic) for t in gone_rows] == [
        (("deleted", "orders", 0), GONE, 7, "dc1.orders"), (("deleted", "orders", 1), GONE, 9, "dc1.orders")]


def test_a_group_whose_offsets_were_not_read_is_kept_however_long():
    lines: list[str] = []
    translate = loop(_Destination(refusals=0), lines, translator=_Renaming(), gone=GonePositions(after_s=0))
    translate.take_batch([GroupCommit("unread", "orders", 0, 40, 1000)])
    for at in (0, 100, 1000):
        translate.source_groups(_read(at, {}, unread=frozenset({"unread"})))
        translate.step()
    assert set(translate.latest) == {("unread", "orders", 0)}


def test_a_group_made_again_after_it_was_forgotten_is_translated_as_new():
    lines: list[str] = []
    translate = loop(_Destination(refusals=0), lines, translator=_Renaming(), gone=GonePositions(after_s=0))
    translate.take_batch([GroupCommit("again", "orders", 0, 40, 1000)])
    translate.source_groups(_read(0, {}))
    translate.step()
    assert translate.latest == {}
    changed = translate.take_batch([GroupCommit("again", "orders", 0, 40, 1000)])
    assert [t.key for t, _ in changed] == [("again", "orders", 0)]


def test_a_position_counts_as_still_from_when_its_offset_last_moved_not_from_its_last_commit():
    translate = loop(_Destination(refusals=0), [], translator=_Renaming())
    translate.take_batch([GroupCommit("idle", "orders", 0, 40, 1000), GroupCommit("busy", "orders", 0, 7, 900)])
    first = translate.still_for()
    time.sleep(0.01)
    # the same offset committed again, with a newer timestamp, is not a move; a new offset is
    translate.take_batch([GroupCommit("idle", "orders", 0, 40, 2000), GroupCommit("busy", "orders", 0, 8, 2000)])
    again = translate.still_for()
    assert again[("idle", "orders", 0)] >= first[("idle", "orders", 0)]
    assert again[("busy", "orders", 0)] < again[("idle", "orders", 0)]
