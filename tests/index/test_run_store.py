"""The run store: runs taken in any order and any number of times, and where a commit lands."""

from __future__ import annotations

import pytest

from dr_stream.index.run_store import Located, Run, RunStore, coalesced

KEY = ("t", 0, "t", 0)


def run(origin_start, origin_end, dest_start, dest_end, topic="t", dest_topic="t"):
    return Run("c1", topic, 0, dest_topic, 0, origin_start, origin_end, dest_start, dest_end)


def spans(store, key=KEY):
    return [(r.origin_start, r.origin_end, r.dest_start, r.dest_end) for r in store.runs_of(key)]


class TestLocate:
    # origin 200..999 landed at 300..1099 (dc2 had 300 records of its own first)
    @pytest.mark.parametrize(("committed", "expected"), [(200, 300), (250, 350), (999, 1099)])
    def test_an_offset_inside_a_run_maps_exactly(self, committed, expected):
        assert RunStore([run(200, 999, 300, 1099)]).locate(KEY, committed) == Located(expected, "exact", 999)

    def test_an_offset_before_everything_copied_maps_to_the_first_copied_record(self):
        assert RunStore([run(200, 999, 300, 1099)]).locate(KEY, 50) == Located(300, "exact", 999)

    def test_an_offset_in_a_gap_between_runs_maps_to_the_next_copied_record(self):
        assert RunStore([run(0, 9, 0, 9), run(20, 29, 15, 24)]).locate(KEY, 12) == Located(15, "exact", 29)

    def test_an_offset_past_everything_copied_resumes_after_the_last_copied_record(self):
        store = RunStore([run(0, 9, 0, 9)])
        assert store.locate(KEY, 10) == Located(10, "next", 9)
        assert store.locate(KEY, 15) == Located(10, "next", 9)

    def test_a_record_copied_twice_resumes_at_its_first_copy(self):
        assert RunStore([run(0, 9, 0, 9), run(5, 9, 10, 14)]).locate(KEY, 7) == Located(7, "exact", 9)

    def test_no_run_for_the_partition_is_unknown(self):
        assert RunStore([run(0, 9, 0, 9)]).locate(("u", 0, "u", 0), 3) == Located(None, "unknown", None)

    def test_renamed_topics_are_looked_up_under_the_destination_name(self):
        store = RunStore([run(0, 9, 100, 109, dest_topic="dc1.t")])
        assert store.locate(("t", 0, "dc1.t", 0), 3) == Located(103, "exact", 9)
        assert store.locate(KEY, 3).method == "unknown"


class TestCopiedLate:
    # origin 0-2 and 5-9 copied first; 3-4, which a failed write left out, copied after them at 8-9
    RUNS = (run(0, 2, 0, 2), run(5, 9, 3, 7), run(3, 4, 8, 9))

    def test_an_offset_places_a_group_at_the_first_destination_record_at_or_past_it(self):
        store = RunStore(self.RUNS)
        assert store.locate(KEY, 3) == Located(3, "exact", 9), "from 5's copy: 3 and 4 follow, nothing is missed"
        assert store.locate(KEY, 6) == Located(4, "exact", 9)
        assert store.locate(KEY, 1) == Located(1, "exact", 9)
        assert store.locate(KEY, 10) == Located(10, "next", 9)

    def test_offsets_a_batch_read_are_uncopied_only_where_no_run_holds_them_whatever_the_order(self):
        store = RunStore([*self.RUNS, run(12, 14, 10, 12)])
        assert store.uncopied(("t", 0), 5, 15) == [(10, 12)], "5-9 stand before 3-4 on the destination"
        assert store.uncopied(("t", 0), 0, 5) == []

    def test_the_last_copied_offset_is_the_highest_not_the_newest_on_the_destination(self):
        assert RunStore(self.RUNS).last_copied() == {("t", 0): 9}
        assert RunStore(reversed(self.RUNS)).last_copied() == {("t", 0): 9}


class TestGatedNext:
    def test_next_waits_until_the_flow_has_handled_every_record_before_the_commit(self):
        store = RunStore([run(0, 9, 0, 9)])
        assert store.locate(KEY, 12, processed_through=None, gated=True) == Located(None, "waiting", 9)
        assert store.locate(KEY, 12, processed_through=11, gated=True) == Located(None, "waiting", 9)
        assert store.locate(KEY, 12, processed_through=12, gated=True) == Located(10, "next", 9)

    def test_an_exact_answer_never_waits(self):
        store = RunStore([run(0, 9, 0, 9)])
        assert store.locate(KEY, 5, processed_through=None, gated=True) == Located(5, "exact", 9)


class TestAdd:
    def test_a_growing_run_published_again_replaces_its_earlier_version(self):
        store = RunStore([run(0, 9, 100, 109), run(0, 19, 100, 119)])
        assert spans(store) == [(0, 19, 100, 119)]

    def test_an_older_version_arriving_late_changes_nothing(self):
        store = RunStore([run(0, 19, 100, 119), run(0, 9, 100, 109)])
        assert spans(store) == [(0, 19, 100, 119)]

    def test_runs_that_continue_each_other_merge_and_runs_out_of_order_sort(self):
        store = RunStore([run(20, 29, 120, 129), run(0, 9, 100, 109), run(10, 19, 110, 119)])
        assert spans(store) == [(0, 29, 100, 129)]

    def test_a_rebuilt_run_overlapping_reported_ones_merges_with_them(self):
        store = RunStore([run(0, 9, 100, 109), run(20, 29, 120, 129), run(5, 24, 105, 124)])
        assert spans(store) == [(0, 29, 100, 129)]

    def test_a_gap_on_either_side_keeps_runs_apart(self):
        store = RunStore([run(0, 9, 100, 109), run(12, 19, 110, 117), run(20, 29, 125, 134)])
        assert spans(store) == [(0, 9, 100, 109), (12, 19, 110, 117), (20, 29, 125, 134)]

    def test_last_copied_is_the_highest_origin_offset_per_source_partition(self):
        store = RunStore([run(0, 9, 0, 9), run(0, 4, 0, 4, topic="u", dest_topic="u")])
        assert store.last_copied() == {("t", 0): 9, ("u", 0): 4}
        assert len(store) == 2


def test_runs_whose_records_retention_removed_are_forgotten_and_straddling_ones_kept():
    store = RunStore([run(0, 9, 0, 9), run(10, 19, 15, 24)])
    assert store.drop_deleted({("t", 0): 12}) == 1
    assert spans(store) == [(10, 19, 15, 24)]
    assert store.drop_deleted({("u", 0): 100}) == 0


def test_a_partition_with_no_run_yet_waits_for_the_copy_rather_than_falling_back_to_timestamps():
    store = RunStore()
    assert store.locate(KEY, 5, processed_through=None, gated=True) == Located(None, "waiting", None)
    assert store.locate(KEY, 5, processed_through=5, gated=True) == Located(None, "unknown", None)
    assert store.locate(KEY, 5) == Located(None, "unknown", None)


def test_uncovered_is_what_lies_past_each_destination_partition_s_last_run():
    store = RunStore([run(0, 9, 100, 109), run(0, 4, 0, 4, topic="u", dest_topic="u")])
    bounds = {("t", 0): (50, 120), ("u", 0): (0, 5), ("v", 0): (3, 8), ("w", 0): (0, 0)}
    assert store.uncovered(bounds) == {("t", 0): (110, 120), ("v", 0): (3, 8)}


class TestCoalesced:
    def test_reports_of_one_growing_run_become_one_row_with_the_latest_topic_offset(self):
        got = coalesced([(run(0, 9, 0, 9), 5), (run(10, 19, 10, 19), 7), (run(0, 19, 0, 19), 6)])
        assert [((r.origin_start, r.origin_end, r.dest_start, r.dest_end), at) for r, at in got] == [
            ((0, 19, 0, 19), 7)]

    def test_a_gap_or_another_mapping_starts_a_new_row_and_keys_stay_apart(self):
        got = coalesced([(run(0, 9, 0, 9), 1), (run(10, 19, 12, 21), 2), (run(30, 39, 40, 49), 3),
                         (run(0, 9, 0, 9, topic="u", dest_topic="u"), None)])
        assert sorted(((r.origin_topic, r.origin_start, r.dest_start), at) for r, at in got) == [
            (("t", 0, 0), 1), (("t", 10, 12), 2), (("t", 30, 40), 3), (("u", 0, 0), None)]

    def test_a_rebuilt_run_merged_with_a_reported_one_keeps_the_reported_offset(self):
        got = coalesced([(run(0, 9, 0, 9), None), (run(10, 19, 10, 19), 4)])
        assert [(r.dest_end, at) for r, at in got] == [(19, 4)]


class TestRecreatedSource:
    """The source topic deleted and created again: its offsets start over, its copies go on."""

    def test_the_new_topics_offsets_are_placed_on_its_own_copies_never_on_the_old_ones(self):
        store = RunStore([run(0, 299, 0, 299)])
        store.begin_life(("t", 0), 300)
        store.add(run(0, 99, 300, 399))
        assert store.locate(KEY, 50) == Located(350, "exact", 99)
        assert store.last_copied() == {("t", 0): 99}

    def test_an_old_run_reported_again_or_loaded_later_is_not_taken(self):
        store = RunStore([run(0, 99, 300, 399)], life_starts={("t", 0): 300})
        store.add(run(0, 299, 0, 299))  # the old topic's run, read back from the table or the runs topic
        assert store.runs_of(KEY) == [run(0, 99, 300, 399)]

    def test_the_old_topics_copies_are_not_gaps_to_scan(self):
        store = RunStore(life_starts={("t", 0): 300})
        assert store.uncovered({("t", 0): (0, 350)}) == {("t", 0): (300, 350)}


def test_a_rewound_source_s_old_copies_past_the_cut_leave_the_store_and_its_new_ones_are_found():
    store = RunStore([run(0, 99, 0, 99)])
    store.rewind(("t", 0), 60, 100)  # the source ends at 60 now; its new records are copied from 100
    assert [(r.origin_start, r.origin_end, r.dest_start, r.dest_end) for r in store] == [(0, 59, 0, 59)]
    store.add(run(70, 99, 70, 99))  # an old report of the stale copies is cut as well
    store.add(run(60, 89, 100, 129))
    key = ("t", 0, "t", 0)
    assert store.locate(key, 50).offset == 50
    assert store.locate(key, 75).offset == 115
    assert store.last_copied() == {("t", 0): 89}


def test_a_store_built_with_rewinds_applies_them_to_every_run():
    store = RunStore([run(0, 99, 0, 99), run(60, 69, 100, 109)], rewinds={("t", 0): [(60, 100)]})
    assert [(r.origin_start, r.origin_end, r.dest_start) for r in store] == [(0, 59, 0), (60, 69, 100)]
    assert store.uncovered({("t", 0): (0, 120)}) == {("t", 0): (110, 120)}


def _placed_by_reading_every_run(runs: list[Run], offset: int):
    """The disordered key's rule as it reads: every run of the key, each time."""
    inside = [r for r in runs if r.copies is not None and r.origin_start < offset <= r.origin_end]
    if inside:
        return min(inside, key=lambda r: r.dest_start)
    places = [r.dest_start + max(offset - r.origin_start, 0) for r in runs if r.origin_end >= offset]
    return min(places) if places else None


def test_a_key_copied_out_of_order_places_every_offset_as_reading_all_its_runs_would():
    import random

    from dr_stream.index.run_store import ByOrigin
    chooser = random.Random(66)
    for _ in range(300):
        runs, dest = [], 0
        for _ in range(chooser.randint(1, 30)):
            first = chooser.randint(0, 400)
            length = chooser.randint(1, 40)
            span = chooser.random() < 0.2
            copies = chooser.randint(1, length) if span else None
            runs.append(Run("c1", "t", 0, "t", 0, first, first + length - 1, dest, dest + length - 1,
                            copies=copies))
            dest += length + chooser.randint(0, 3)
        by_origin = ByOrigin(runs)
        assert by_origin.furthest == max(r.origin_end for r in runs)
        for offset in range(0, 460, 3):
            assert by_origin.place(offset) == _placed_by_reading_every_run(runs, offset), (runs, offset)


def test_a_run_reported_late_is_found_by_the_next_lookup_of_a_key_copied_out_of_order():
    # origin 20..24 was copied after 50..59: the key is out of order and its lookup reads its
    # runs in origin order, made at the first lookup; a run reported later must change them
    store = RunStore([run(0, 9, 0, 9), run(50, 59, 20, 29), run(20, 24, 30, 34)])
    assert store.locate(KEY, 30) == Located(20, "exact", 59)
    store.add(run(30, 39, 10, 19))
    assert store.locate(KEY, 30) == Located(10, "exact", 59)
    assert store.locate(KEY, 22) == Located(10, "exact", 59)
    assert store.locate(KEY, 5) == Located(5, "exact", 59)
