"""What the replicate query has handled (pure): a batch counts once its runs are known, and the
offsets a batch read past without a copy are kept for the loss check."""

from __future__ import annotations

from dr_stream.index.handled_offsets import HandledOffsets, spanned
from dr_stream.index.run_store import Run, RunStore, gaps_between


def run(origin_start: int, origin_end: int, dest_start: int) -> Run:
    return Run("c1", "t", 0, "t", 0, origin_start, origin_end, dest_start, dest_start + origin_end - origin_start)


def test_the_gaps_of_a_range_are_what_no_copied_range_covers():
    assert gaps_between(10, 30, [(12, 14), (15, 19), (25, 40)]) == [(10, 12), (20, 25)]
    assert gaps_between(10, 30, []) == [(10, 30)]
    assert gaps_between(10, 30, [(0, 40)]) == []
    assert gaps_between(10, 30, [(31, 40)]) == [(10, 30)]


def test_a_store_names_the_offsets_of_a_batch_it_holds_no_copy_of():
    store = RunStore([run(0, 39, 0), run(60, 79, 40), run(85, 99, 60)])
    assert store.uncopied(("t", 0), 30, 90) == [(40, 60), (80, 85)]
    assert store.uncopied(("t", 0), 100, 120) == [(100, 120)]
    assert store.uncopied(("t", 1), 0, 5) == [(0, 5)]


def test_a_committed_batch_moves_what_is_handled_and_leaves_its_uncopied_offsets_once():
    handled, store = HandledOffsets(), RunStore([run(0, 39, 0), run(60, 79, 40)])
    handled.run_published(("t", 0), 79)
    handled.batch_committed({("t", 0): 100, ("t", 1): 7}, ({("t", 0): 0, ("t", 1): 7}, {("t", 0): 100, ("t", 1): 7}))
    assert handled.first_waiting() is not None and handled.count_first(store)
    assert handled.first_waiting() is None
    assert handled.next_to_handle(store.last_copied()) == {("t", 0): 100, ("t", 1): 7}
    assert handled.take_uncopied() == {("t", 0): [(40, 60), (80, 100)]}
    assert handled.take_uncopied() == {}
    handled.batch_committed({("t", 0): 120}, None)  # a batch that delivered a record per offset
    handled.count_first(store)
    assert handled.take_uncopied() == {} and handled.through[("t", 0)] == 120


def test_only_partitions_a_batch_read_with_a_known_start_are_spanned():
    assert spanned(({("a", 0): 5, ("a", 1): 7}, {("a", 0): 9, ("a", 1): 7, ("c", 0): 4})) == {("a", 0): (5, 9)}
    assert spanned(None) == {}
