"""What the share-group sync says and keeps (pure): which start offsets are handled until the
source's move, the one line per group it sets, and why a group was not set."""

from __future__ import annotations

from dr_stream.core.policy import GroupFilter, TopicFilter
from dr_stream.kafka.group_offsets import Committed
from dr_stream.positions.group_sync import decide
from dr_stream.positions.share_group_sync import ShareGroupSync, handled, set_line, skip_reason
from dr_stream.positions.sync_outcome import COMMITTED, UNCHANGED, WAITING, ahead, failed, held, not_translated
from dr_stream.positions.translation_rule import Translation


def translation(partition: int, offset: int | None, method: str = "exact", note: str = "") -> Translation:
    return Translation(group="s", topic="orders", partition=partition, source_offset=40 + partition,
                       source_timestamp=-1, dest_topic="orders", dest_partition=partition, offset=offset,
                       method=method, note=note, clamped=False, log_start=0, log_end=200, last_copied=150,
                       source_log_end=150, translated_at=0)


def test_a_start_offset_set_unchanged_or_behind_the_destination_waits_for_the_source_to_move():
    assert handled(COMMITTED) and handled(UNCHANGED)
    assert handled(ahead(90))
    assert not handled(held("STABLE", 1))
    assert not handled(failed("TimeoutException")) and not handled(WAITING)


def test_the_set_line_names_each_partition_its_offset_method_and_source_offset():
    line = set_line("s", "dc2", [(translation(0, 50), COMMITTED), (translation(1, 77), UNCHANGED)])
    assert line == "share group s: start offsets set on dc2: orders[0] 50 (exact, source 40)"


def test_a_group_with_members_on_the_destination_is_said_skipped_with_the_reason():
    reason = skip_reason([(translation(0, 50), held("STABLE", 1))])
    assert reason == "group is STABLE on the destination (1 members)"


def test_an_untranslated_partition_is_named_and_a_waiting_one_is_no_reason_to_speak():
    assert skip_reason([(translation(0, None, "none", "no index"), not_translated("no index"))]) == \
        "orders[0] not translated (no index)"
    assert skip_reason([(translation(0, 50, "waiting"), WAITING), (translation(1, 77), COMMITTED)]) is None


class _Source:
    def __init__(self) -> None:
        self.offset = 40

    def listed(self) -> dict[str, str]:
        return {"s": "EMPTY", "other": "EMPTY"}

    def committed(self, groups):
        return {g: {("orders", 0): Committed(self.offset, "")} for g in groups}


class _Translator:
    def __init__(self) -> None:
        self.asked: list[int] = []

    def translate(self, commits):
        self.asked += [c.offset for c in commits]
        return [Translation(group=c.group, topic=c.topic, partition=c.partition, source_offset=c.offset,
                            source_timestamp=c.timestamp, dest_topic=c.topic, dest_partition=c.partition,
                            offset=c.offset + 10, method="exact", note="", clamped=False, log_start=0, log_end=200,
                            last_copied=150, source_log_end=150, translated_at=0) for c in commits]


class _Destination:
    def __init__(self) -> None:
        self.state, self.offsets = ("EMPTY", 0), {}

    def apply_many(self, wanted, force, dry_run, seen=None):
        out = {}
        for group, offsets in wanted.items():
            out[group] = decide(group, *self.state, {}, offsets)
            self.offsets.update({k: a.offset for k, a in zip(sorted(offsets), out[group], strict=True) if a.wrote})
        return out


def test_a_busy_share_group_is_said_set_once_and_again_only_after_it_was_held():
    lines: list[str] = []
    unsynced: list[tuple[str, int]] = []
    source, translator, destination = _Source(), _Translator(), _Destination()
    sync = ShareGroupSync(source, translator, destination, GroupFilter(("s",)), TopicFilter((".*",)), "dc2",
                          log=lines.append, not_synced=lambda what, groups: unsynced.append((what, groups)))
    sync.round()
    source.offset = 60
    sync.round()
    assert destination.offsets == {("orders", 0): 70}
    assert lines == ["share group s: start offsets set on dc2: orders[0] 50 (exact, source 40)"]
    sync.round()
    assert translator.asked == [40, 60]  # a start offset set and unchanged is not translated again
    destination.state = ("STABLE", 1)
    source.offset = 80
    sync.round()
    sync.round()
    assert lines[1:] == ["share group s: not set on dc2: group is STABLE on the destination (1 members); "
                         "tried again every 5 s"]
    destination.state = ("EMPTY", 0)
    sync.round()  # set once the destination group is empty, the source unmoved
    assert destination.offsets == {("orders", 0): 90}
    assert lines[2:] == ["share group s: start offsets set on dc2: orders[0] 90 (exact, source 80)"]
    # counted every round it stays unlike the source, though said once
    assert unsynced == [("offsets", n) for n in (0, 0, 0, 1, 1, 0)]


class _Shrinking(_Source):
    """A source whose groups and partitions can go away."""

    def __init__(self) -> None:
        super().__init__()
        self.groups = {"s": [0, 1], "t": [0]}

    def listed(self) -> dict[str, str]:
        return {g: "EMPTY" for g in self.groups}

    def committed(self, groups):
        return {g: {("orders", p): Committed(self.offset, "") for p in self.groups[g]} for g in groups}


def test_a_share_group_deleted_or_a_partition_it_left_leaves_nothing_kept_for_it():
    source, destination = _Shrinking(), _Destination()
    destination.state = ("STABLE", 1)  # t is said skipped, so a skip is kept for it too
    sync = ShareGroupSync(source, _Translator(), destination, GroupFilter((".*",)), TopicFilter((".*",)), "dc2",
                          log=lambda line: None)
    sync.round()
    assert set(sync._skips) == {"s", "t"}
    destination.state = ("EMPTY", 0)
    sync.round()
    assert set(sync._handled) == {("s", "orders", 0), ("s", "orders", 1), ("t", "orders", 0)}
    assert sync._said_set == {"s", "t"}
    del source.groups["t"]
    source.groups["s"] = [1]
    sync.round()
    assert set(sync._handled) == {("s", "orders", 1)}
    assert sync._said_set == {"s"} and not sync._skips
