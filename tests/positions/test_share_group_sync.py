"""What the share-group sync says and keeps (pure): which start offsets are handled until the
source's move, the one line per group it sets, and why a group was not set."""

from __future__ import annotations

from dr_stream.positions.share_group_sync import handled, set_line, skip_reason
from dr_stream.positions.translation_rule import Translation


def translation(partition: int, offset: int | None, method: str = "exact", note: str = "") -> Translation:
    return Translation("s", "orders", partition, 40 + partition, -1, "orders", partition, offset, method, note,
                       False, 0, 200, 150, 150, 0)


def test_a_start_offset_set_unchanged_or_behind_the_destination_waits_for_the_source_to_move():
    assert handled("committed") and handled("unchanged")
    assert handled("skipped: destination is ahead at 90; not rewound (--force rewinds)")
    assert not handled("skipped: group is STABLE on the destination (1 members)")
    assert not handled("failed: TimeoutException") and not handled("waiting")


def test_the_set_line_names_each_partition_its_offset_method_and_source_offset():
    line = set_line("s", "dc2", [(translation(0, 50), "committed"), (translation(1, 77), "unchanged")])
    assert line == "share group s: start offsets set on dc2: orders[0] 50 (exact, source 40)"


def test_a_group_with_members_on_the_destination_is_said_skipped_with_the_reason():
    reason = skip_reason([(translation(0, 50), "skipped: group is STABLE on the destination (1 members)")])
    assert reason == "group is STABLE on the destination (1 members)"


def test_an_untranslated_partition_is_named_and_a_waiting_one_is_no_reason_to_speak():
    assert skip_reason([(translation(0, None, "none", "no index"), "skipped: not translated (no index)")]) == \
        "orders[0] not translated (no index)"
    assert skip_reason([(translation(0, 50, "waiting"), "waiting"), (translation(1, 77), "committed")]) is None
