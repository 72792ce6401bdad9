"""Spans: runs below every live position kept as a few ranges, still placing every origin offset
exactly once the window `locate` names is read back from the destination."""

from __future__ import annotations

import random
from itertools import pairwise

from deltalake import write_deltalake

from dr_stream.index.index_table import RUN_SCHEMA
from dr_stream.index.kept_runs import spans_sql
from dr_stream.index.run_store import Run, RunStore, cut
from dr_stream.index.spans import (
    LivePosition,
    in_spans,
    pinned,
    reads_of,
    resolved,
    span_bounds,
    span_store,
    store_in_spans,
)
from dr_stream.runtime.delta_appends import arrow_table
from dr_stream.runtime.delta_reads import DeltaReads

KEY = ("orders", 0, "orders", 0)


def _copies(rng: random.Random, origin_count: int, marker_every: tuple[int, int], foreign_p: float
            ) -> list[tuple[int, int]]:
    """(origin offset, destination offset) of each copy: a marker's origin offset after every
    transaction, another writer's record now and then between ours on the destination."""
    pairs, origin, dest, left = [], 0, 0, rng.randint(*marker_every)
    while origin < origin_count:
        if left == 0:
            origin, left = origin + 1, rng.randint(*marker_every)  # a commit marker
            continue
        if rng.random() < foreign_p:
            dest += 1  # the other side's record
        pairs.append((origin, dest))
        origin, dest, left = origin + 1, dest + 1, left - 1
    return pairs


def _runs(pairs: list[tuple[int, int]]) -> list[Run]:
    runs: list[Run] = []
    for origin, dest in pairs:
        last = runs[-1] if runs else None
        if last and last.origin_end + 1 == origin and last.dest_end + 1 == dest:
            runs[-1] = Run(**{**last.__dict__, "origin_end": origin, "dest_end": dest})
        else:
            runs.append(Run("c1", *KEY, origin, origin, dest, dest, 1, 1, 1))
    return runs


def _read_back(runs: list[Run], window: tuple[int, int]) -> list[Run]:
    """What reading destination offsets [first, last] gives: the copies' runs cut to the window."""
    first, last = window
    out = []
    for r in runs:
        lo, hi = max(r.dest_start, first), min(r.dest_end, last)
        if lo <= hi:
            out.append(Run(**{**r.__dict__, "origin_start": r.origin_start + lo - r.dest_start,
                              "origin_end": r.origin_start + hi - r.dest_start, "dest_start": lo, "dest_end": hi}))
    return out


def _place(store: RunStore, runs: list[Run], offset: int):
    found = store.locate(KEY, offset)
    if found.method != "within":
        return found.offset, found.method
    span = next(r for r in store.runs_of(KEY) if r.origin_start < offset <= r.origin_end)
    assert found.window is not None
    placed = resolved(span, offset, _read_back(runs, found.window))
    return placed.offset, placed.method


def test_every_origin_offset_lands_where_the_runs_say_after_its_window_is_read_back():
    rng = random.Random(1)
    for foreign_p in (0.0, 0.2):
        runs = _runs(_copies(rng, 6_000, (1, 30), foreign_p))
        whole = RunStore(runs)
        floor = 4_500
        spanned = RunStore([r for key_runs in store_in_spans({KEY: runs}, {KEY[:2]: floor}, 500).values()
                            for r in key_runs])

        below = [r for r in runs if r.origin_end < floor]
        assert len([r for r in spanned.runs_of(KEY) if r.origin_end < floor]) < len(below) / 20
        assert all(r.slack <= 500 for r in spanned.runs_of(KEY))
        assert all(r.copies is None for r in spanned.runs_of(KEY) if r.origin_end >= floor)
        for offset in range(0, 6_050):
            expected = whole.locate(KEY, offset)
            assert _place(spanned, runs, offset) == (expected.offset, expected.method), offset


def test_a_window_holds_at_most_the_spans_slack_plus_one_records():
    runs = _runs(_copies(random.Random(2), 50_000, (5, 50), 0.1))
    spanned = RunStore(in_spans(runs, 10**9, 2_000))
    for offset in range(1, 50_000, 97):
        found = spanned.locate(KEY, offset)
        if found.method == "within":
            assert found.window is not None
            assert found.window[1] - found.window[0] + 1 <= 2_001


def test_runs_copied_out_of_order_stay_runs():
    runs = [Run("c1", *KEY, 10, 19, 0, 9), Run("c1", *KEY, 5, 9, 10, 14), Run("c1", *KEY, 21, 30, 15, 24)]
    assert in_spans(runs, 10**9) == runs


def test_a_run_reported_again_inside_a_span_adds_nothing_and_its_part_past_it_continues_it():
    runs = _runs(_copies(random.Random(3), 1_000, (3, 9), 0.0))
    store = RunStore(in_spans(runs, 900))
    before = store.runs_of(KEY)
    store.add(runs[2])
    assert store.runs_of(KEY) == before

    # a run that grew after its first report was spanned (a marker at origin 10 before it)
    store = RunStore(in_spans([Run("c1", *KEY, 0, 9, 0, 9), Run("c1", *KEY, 11, 20, 10, 19)], 100))
    store.add(Run("c1", *KEY, 11, 25, 10, 24))
    assert [(r.origin_start, r.origin_end, r.dest_start, r.dest_end, r.copies) for r in store.runs_of(KEY)] == [
        (0, 20, 0, 19, 20), (21, 25, 20, 24, None)]
    assert store.locate(KEY, 23).offset == 22


def test_a_span_cut_by_a_rewound_source_still_places_what_it_keeps():
    runs = _runs(_copies(random.Random(4), 2_000, (2, 20), 0.1))
    span = in_spans(runs, 10**9, 10**6)[0]
    assert span.copies is not None
    kept = cut(span, 1_200, span.dest_end + 1)
    assert kept is not None and kept.origin_end == 1_199 and kept.dest_end == span.dest_end
    whole = RunStore(runs)
    store = RunStore([kept])
    for offset in range(1, 1_200, 7):
        found = store.locate(KEY, offset)
        assert found.window is not None
        placed = resolved(kept, offset, _read_back(runs, found.window))
        expected = whole.locate(KEY, offset)
        # a copy of a record the source took back (origin 1,200 on) is never an answer
        if expected.offset is not None and expected.offset <= whole.locate(KEY, 1_199).offset:
            assert (placed.offset, placed.method) == (expected.offset, "exact"), offset


def test_upkeep_after_upkeep_and_after_retention_keeps_every_span_under_the_bound():
    runs = _runs(_copies(random.Random(5), 40_000, (1, 12), 0.15))
    kept = in_spans(runs, 35_000, 1_000)
    for _ in range(3):
        kept = in_spans(kept[2:], 35_000, 1_000)  # retention took the oldest, then upkeep again
        assert all(r.slack < 1_000 for r in kept)
    assert len([r for r in kept if r.copies is not None]) > 10


def _table(tmp_path, runs: list[Run]) -> str:
    path = str(tmp_path / "offset-index")
    write_deltalake(path, arrow_table(RUN_SCHEMA, [
        (r.origin_cluster, r.origin_topic, r.origin_partition, r.dest_topic, r.dest_partition, r.origin_start,
         r.origin_end, r.dest_start, r.dest_end, r.records, 1, 1, 1, None) for r in runs]))
    return path


def _shape(rows) -> list[tuple[int, int, int, int, int]]:
    return sorted((r["origin_start"], r["origin_end"], r["dest_start"], r["dest_end"], r["records"]) for r in rows)


def _estate() -> tuple[list[Run], list[Run]]:
    """A key the rule spans, and a key copied out of order, which keeps its rows."""
    spanned = _runs(_copies(random.Random(6), 8_000, (1, 12), 0.15))
    disordered = [Run("c1", "orders", 1, "orders", 1, 10, 19, 0, 9), Run("c1", "orders", 1, "orders", 1, 5, 9, 10, 14),
                  Run("c1", "orders", 1, "orders", 1, 21, 30, 15, 24)]
    return spanned, disordered


def test_the_table_upkeep_spans_rows_as_the_store_spans_runs(tmp_path):
    spanned, disordered = _estate()
    path = _table(tmp_path, spanned + disordered)
    floors = {("orders", 0): 6_000, ("orders", 1): 100}

    rows = DeltaReads().query(path, spans_sql("SELECT * FROM t", "c1", floors, 1_000))

    expected = in_spans(spanned, 6_000, 1_000) + disordered
    assert _shape(rows) == _shape([r.__dict__ | {"records": r.records} for r in expected])
    assert len(rows) < len(spanned) / 3
    # another cluster's rows and a partition with no floor are left as they are
    assert len(DeltaReads().query(path, spans_sql("SELECT * FROM t", "c2", floors, 1_000))) == len(spanned) + 3
    assert len(DeltaReads().query(path, spans_sql("SELECT * FROM t", "c1", {("orders", 1): 100}, 1_000))) == \
        len(spanned) + 3


def test_spark_spans_the_table_as_delta_rs_does(spark, tmp_path):
    spanned, disordered = _estate()
    path = _table(tmp_path, spanned[:600] + disordered)
    sql = spans_sql("SELECT * FROM t", "c1", {("orders", 0): 1_500, ("orders", 1): 100}, 300)
    spark.read.format("delta").load(path).createOrReplaceTempView("t")

    through_spark = _shape(r.asDict() for r in spark.sql(sql).collect())

    assert through_spark == _shape(DeltaReads().query(path, sql))
    assert len(through_spark) < 300


def test_windows_of_one_partition_close_together_are_read_once_and_far_apart_in_rounds():
    rounds = reads_of([("t", 0, 100, 200), ("t", 0, 150, 260), ("t", 0, 50_000, 50_100), ("u", 1, 5, 9)], close=1_000)
    assert rounds == [{("t", 0): (100, 260), ("u", 1): (5, 9)}, {("t", 0): (50_000, 50_100)}]


def test_a_window_that_held_no_copy_places_the_position_at_its_start_said_not_exact():
    runs = _runs(_copies(random.Random(8), 3_000, (2, 20), 0.1))
    span = in_spans(runs, 10**9, 10**6)[0]
    placed = resolved(span, 1_500, [])
    window = RunStore([span]).locate(KEY, 1_500).window
    assert window is not None and window[1] > window[0]
    # reads the window again rather than skip a copy in it
    assert (placed.method, placed.offset, placed.window) == ("window", window[0], window)


def test_a_span_still_answers_through_its_window_once_a_late_copy_makes_its_key_out_of_order():
    store = RunStore(in_spans([Run("c1", *KEY, 0, 9, 0, 9), Run("c1", *KEY, 11, 20, 10, 19),
                               Run("c1", *KEY, 30, 39, 20, 29)], 25))
    store.add(Run("c1", *KEY, 22, 24, 30, 32))  # copied after 30-39, below them: a failed write's records
    found = store.locate(KEY, 12)
    assert (found.method, found.window) == ("within", (11, 12))
    # the first destination offset holding a record at or past 23: a consumer from there misses none
    assert store.locate(KEY, 23).offset == 20


def test_the_upkeep_spans_a_partition_whose_newest_run_grew_while_the_spans_were_made():
    runs = _runs(_copies(random.Random(9), 3_000, (3, 9), 0.0))
    store = RunStore(runs)
    newest = runs[-1]

    class GrowsAfterTheSnapshot:
        """The store's lock, with the copy growing its newest run as the snapshot's hold ends."""
        entered = 0

        def __enter__(self):
            self.entered += 1

        def __exit__(self, *exc):
            if self.entered == 1:
                store.add(Run(**{**newest.__dict__, "origin_end": newest.origin_end + 5,
                                 "dest_end": newest.dest_end + 5}))

    fewer = span_store(store, "c1", {KEY[:2]: newest.origin_start}, 1_000, GrowsAfterTheSnapshot())

    held = store.runs_of(KEY)
    assert fewer > len(runs) / 2 and held[-1].origin_end == newest.origin_end + 5
    assert all(r.copies is not None for r in held[:-1])
    assert [r.dest_start for r in held] == sorted(r.dest_start for r in held)


def _late_copy(pairs: list[tuple[int, int]], first: int, last: int, resumed: int) -> list[tuple[int, int]]:
    """`pairs` as a restart leaves them after a failed write: origin offsets first..last were not
    written while later ones through `resumed` were, and are copied again after those, before the
    copy goes on (each destination offset keeps its order, the origins do not)."""
    origins = [o for o, _ in pairs]
    order = ([o for o in origins if o < first] + [o for o in origins if last < o <= resumed]
             + [o for o in origins if first <= o <= last] + [o for o in origins if o > resumed])
    return list(zip(order, sorted(d for _, d in pairs), strict=True))


def test_a_late_copy_stays_runs_and_the_runs_in_order_around_it_still_become_spans():
    pairs = _late_copy(_copies(random.Random(10), 6_000, (1, 20), 0.1), 2_000, 2_049, 2_120)
    runs = _runs(pairs)
    whole = RunStore(runs)
    spanned = RunStore(in_spans(runs, 5_000, 500))

    held = [r for r in spanned.runs_of(KEY) if r.origin_end < 5_000]
    assert len(held) < len([r for r in runs if r.origin_end < 5_000]) / 20
    # the late copy and the copies it came after stay runs: only they are out of origin order
    alone = [r for r in held if r.copies is None]
    assert all(2_000 <= r.origin_start and r.origin_end <= 2_120 for r in alone), alone
    assert alone[0].origin_start == 2_050 and min(r.origin_start for r in alone) == 2_000
    for offset in range(0, 6_050):
        expected = whole.locate(KEY, offset)
        assert _place(spanned, runs, offset) == (expected.offset, expected.method), offset


def test_the_table_spans_a_key_with_a_late_copy_as_the_store_does(tmp_path):
    runs = _runs(_late_copy(_copies(random.Random(11), 4_000, (1, 12), 0.15), 1_000, 1_009, 1_030))
    path = _table(tmp_path, runs)

    rows = DeltaReads().query(path, spans_sql("SELECT * FROM t", "c1", {KEY[:2]: 3_000}, 1_000))

    expected = in_spans(runs, 3_000, 1_000)
    assert _shape(rows) == _shape([r.__dict__ | {"records": r.records} for r in expected])
    assert len(rows) < len(runs) / 3


def test_the_driver_spans_a_key_a_late_copy_left_out_of_order():
    runs = _runs(_late_copy(_copies(random.Random(12), 3_000, (3, 9), 0.0), 500, 509, 540))
    store = RunStore(runs)
    whole = RunStore(runs)

    fewer = span_store(store, "c1", {KEY[:2]: 2_500}, 1_000)

    assert fewer > len(runs) / 2
    for offset in range(0, 3_000, 7):
        expected = whole.locate(KEY, offset)
        assert _place(store, runs, offset) == (expected.offset, expected.method), offset


def test_an_idle_position_pins_its_run_and_the_runs_above_it_still_become_spans():
    runs = _runs(_copies(random.Random(13), 20_000, (1, 12), 0.1))
    whole = RunStore(runs)
    idle = [1_000, 1_001, 7_777]  # two groups stopped next to each other, one further on
    # and one on a marker, past 12,000: the run after it answers it
    idle += [next(a.origin_end + 1 for a, b in pairwise(runs)
                  if a.origin_end > 12_000 and b.origin_start == a.origin_end + 2)]
    spanned = RunStore(in_spans(runs, 19_000, 1_000, pins=idle))

    held = [r for r in spanned.runs_of(KEY) if r.origin_end < 19_000]
    assert len(held) < len([r for r in runs if r.origin_end < 19_000]) / 20
    # every idle position is answered by a run, exact without reading the destination
    for offset in idle:
        found = spanned.locate(KEY, offset)
        assert (found.offset, found.method) == (whole.locate(KEY, offset).offset, "exact"), offset
    for offset in range(0, 19_050, 3):
        expected = whole.locate(KEY, offset)
        assert _place(spanned, runs, offset) == (expected.offset, expected.method), offset


def test_without_pins_an_idle_position_below_the_floor_sits_in_a_span():
    runs = _runs(_copies(random.Random(13), 20_000, (1, 12), 0.1))
    assert RunStore(in_spans(runs, 19_000, 1_000)).locate(KEY, 7_777).method == "within"


def test_a_pin_answers_to_the_run_holding_it_or_the_first_after_its_marker():
    runs = [Run("c1", *KEY, 0, 9, 0, 9), Run("c1", *KEY, 11, 20, 10, 19), Run("c1", *KEY, 22, 30, 20, 28)]
    assert pinned(runs, [5]) == [True, False, False]
    assert pinned(runs, [10, 21]) == [False, True, True]  # each on a marker: the next run answers
    assert pinned(runs, [31]) == [False, False, False]  # past every run: the next copy answers
    assert pinned(runs, []) == [False, False, False]


def test_idle_positions_pin_and_active_ones_lower_the_floor():
    live = [LivePosition("orders", 0, 500), LivePosition("orders", 0, 120, idle=True),
            LivePosition("orders", 0, 800, idle=True), LivePosition("orders", 1, 40, idle=True),
            LivePosition("orders", 2, 7)]
    bounds = span_bounds(live, {("orders", 0): 900, ("orders", 1): 30})
    # an idle position at or past the floor is above every span already: it pins nothing
    assert bounds.floors == {("orders", 0): 500, ("orders", 1): 30}
    assert bounds.pins == {("orders", 0): (120,)}


def test_the_table_pins_the_rows_the_store_pins(tmp_path):
    spanned, disordered = _estate()
    path = _table(tmp_path, spanned + disordered)
    floors = {("orders", 0): 6_000, ("orders", 1): 100}
    pins = {("orders", 0): (0, 1_234, 1_235, 4_000), ("orders", 1): (12,)}

    rows = DeltaReads().query(path, spans_sql("SELECT * FROM t", "c1", floors, 1_000, pins))

    expected = in_spans(spanned, 6_000, 1_000, pins=pins[("orders", 0)]) + disordered
    assert _shape(rows) == _shape([r.__dict__ | {"records": r.records} for r in expected])
    assert len(rows) < len(spanned) / 3
    assert len(expected) > len(in_spans(spanned, 6_000, 1_000)) + 3


def test_spark_pins_the_table_as_delta_rs_does(spark, tmp_path):
    spanned, disordered = _estate()
    path = _table(tmp_path, spanned[:600] + disordered)
    sql = spans_sql("SELECT * FROM t", "c1", {("orders", 0): 1_500, ("orders", 1): 100}, 300,
                    {("orders", 0): (3, 400, 401, 1_000)})
    spark.read.format("delta").load(path).createOrReplaceTempView("t")

    through_spark = _shape(r.asDict() for r in spark.sql(sql).collect())

    assert through_spark == _shape(DeltaReads().query(path, sql))
    assert through_spark != _shape(DeltaReads().query(
        path, spans_sql("SELECT * FROM t", "c1", {("orders", 0): 1_500, ("orders", 1): 100}, 300)))
