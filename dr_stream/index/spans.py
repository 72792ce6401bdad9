"""Spans: the runs below every live position, kept as a few ranges whose exact places are read
back from the destination when asked.

Copies that never continue each other are the normal case: a transactional source's commit
marker takes an origin offset after every transaction, and with identical topic names in
active-active the destination partition holds the other side's records between ours. Each break
starts a new run, so runs grow with the flow's age (a run per partition per transaction). What a
lookup needs exactly is only the runs at and above the live positions (the groups' committed
offsets and the copy's own): below them, a lookup is rare (a group reset to an old offset, a new
group) and may read the destination.

A *span* is a `Run` that stands for consecutive runs of one key: origin offsets [origin_start,
origin_end] were copied in order into destination offsets [dest_start, dest_end], and at least
`copies` of the offsets on each side are copies. So at most `Run.uncopied` origin offsets (markers,
records filtered as cycles or accounted as a loss) and `Run.foreign` destination offsets (another
writer's records) are not, and their sum, the span's *slack*, is at most `MAX_SLACK`.

The rule that makes a span exact: the first copy at or after origin offset C (os <= C <= oe)
has `C - os - u` copies before it in the span (u in [0, uncopied]) and `f` foreign records
before it (f in [0, foreign]), so it sits within [ds + C - os - uncopied, ds + C - os + foreign]:
that range clamped to the span, at most slack + 1 records, is the window `RunStore.locate` gives
with its `within` answer (`run_store.span_window`). Reading it back and taking runs of the copies
there (`destination_tail.runs_of_records`) places C exactly (`resolved`).

A span's offsets that are not copies were handled all the same (skipped as markers or cycles, or
recorded as a loss when they were found missing), so `RunStore.copied_from` and `uncopied` count
its whole origin range as copied.

`MAX_SLACK` is 10,000: a lookup inside a span reads at most 10,001 records (0.27 s on a local
broker, bench/span_lookup.py), and a week of 1,000 transactional partitions (a marker every 5-50
records) keeps about 60,000 spans (21 MiB in the driver) instead of 30 million runs.

A restart can copy records a failed write had left out after records past them (a broker restart
is enough), so a key's runs are not always in origin order on the destination. A run whose origin
offsets no other run of its key reaches into (every run before it ends below it, every run after
starts above it) is *in order*; spans are made of consecutive runs in order, so no other run of
the key holds an origin offset inside a span and the rule above holds for it. The runs out of
order stay runs, and the rest of their key still becomes spans: a broker restart leaves a few
runs, not a partition that keeps every run for as long as the destination holds it.

An idle group (its position has not moved for `IDLE_AFTER_S`) does not hold the floor down: a
floor under it would keep every run above it exact, a run per transaction for as long as the
group stays idle, bounded by the destination's retention alone. Its position *pins* instead:
the run that answers it (the run holding it, or the first after it in origin order when it
falls on a marker) stays a run and breaks the stretch, and the runs between pins become spans.
So a partition keeps a run per idle position plus a few spans, and every live position is still
placed from memory. An idle group that moves again reads the destination inside a span until
the next upkeep sees it active (its answers are exact all the same).

Invariants: a span is made only from consecutive runs of one key in destination order that are
in order, none of them pinned, and only from runs wholly below the floor given; its `copies` is a lower bound of the
copies it stands for, so a cut can lower it and the window stays right, only wider.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import Any, NamedTuple

from dr_stream.index.run_store import Located, Run, RunKey, RunStore, cut, span_window

MAX_SLACK = 10_000

# A position that has not moved for this long pins its run instead of holding the floor down.
# Long enough that a group committing in bursts (a batch job every few minutes) stays active,
# short against the days an abandoned group sits at one offset.
IDLE_AFTER_S = 600.0

# per source partition, the idle positions below its floor, sorted
Pins = Mapping[tuple[str, int], Sequence[int]]


class LivePosition(NamedTuple):
    """A group's position on a source partition, and whether it has stood still `IDLE_AFTER_S`."""

    topic: str
    partition: int
    offset: int
    idle: bool = False



def in_spans(runs: list[Run], floor: int, max_slack: int = MAX_SLACK, origin_cluster: str | None = None,
             pins: Sequence[int] = ()) -> list[Run]:
    """The runs of one key, in destination order, those wholly below origin offset `floor` (and
    of `origin_cluster`, when given) joined into spans of less than `max_slack`
    (`kept_runs.spans_sql` is the same rule in SQL); runs out of origin order (a restart copied
    them late) and runs `pins` pin are kept as they are, and the ones around them still join."""
    out: list[Run] = []
    last_island = None
    for run, island in zip(runs, islands(runs, floor, max_slack, origin_cluster, pins), strict=True):
        if island is not None and island == last_island:
            out[-1] = spanned(out[-1], run)
        else:
            out.append(run)
        last_island = island
    return out


def in_order(runs: list[Run]) -> list[bool]:
    """Per run of one key (in destination order), whether it is in order: every run before it
    ends below its first origin offset and every run after it starts above its last."""
    ordered = [True] * len(runs)
    reach = -1
    for at, run in enumerate(runs):
        ordered[at] = reach < run.origin_start
        reach = max(reach, run.origin_end)
    lowest = None
    for at in range(len(runs) - 1, -1, -1):
        run = runs[at]
        ordered[at] = ordered[at] and (lowest is None or run.origin_end < lowest)
        lowest = run.origin_start if lowest is None else min(lowest, run.origin_start)
    return ordered


def pinned(runs: list[Run], pins: Sequence[int]) -> list[bool]:
    """Per run of one key, whether a pin answers to it: a pin after the origin end of the run
    before it in origin order, and at most its own origin end (the run holding the position, or
    the first copy after a marker's). `kept_runs.spans_sql` takes the same runs."""
    out = [False] * len(runs)
    if not pins:
        return out
    ordered_pins = sorted(pins)
    previous_end = -1
    for at in sorted(range(len(runs)), key=lambda i: (runs[i].origin_start, runs[i].dest_start)):
        first_after = bisect_right(ordered_pins, previous_end)
        out[at] = first_after < len(ordered_pins) and ordered_pins[first_after] <= runs[at].origin_end
        previous_end = runs[at].origin_end
    return out


def islands(runs: list[Run], floor: int, max_slack: int, origin_cluster: str | None = None,
            pins: Sequence[int] = ()) -> list[tuple[int, int, int] | None]:
    """Per run, the span it joins (equal values in a row join), None for a run kept as it is.

    The rule, chosen so that SQL computes it in one pass and a second upkeep never grows a span
    past the bound: with half the bound `g`, a run's *before* is the slack of the key's runs up to
    it (the offsets between them, either side, and the slack inside earlier spans); runs below the
    floor whose own slack is under `g` join while `before // g` is the same and no run out of
    order, of another cluster or pinned lies between them (such a run starts a new *stretch*). Such a
    span's slack is below g (between its runs) plus its last run's own (below g): under the bound.
    A run whose own slack is `g` or more (a span made earlier) stays alone, as does a run out of
    order."""
    half = max(max_slack // 2, 1)
    out: list[tuple[int, int, int] | None] = []
    before, previous, stretch = 0, None, 0
    for at, (run, ordered, pin) in enumerate(zip(runs, in_order(runs), pinned(runs, pins), strict=True)):
        if previous is not None:
            before += (run.origin_start - previous.origin_end - 1) + (run.dest_start - previous.dest_end - 1)
        own = run.slack
        ours = origin_cluster in (None, run.origin_cluster)
        alone = not ordered or not ours or pin
        stretch += 1 if alone else 0
        if alone or run.origin_end >= floor:
            out.append(None)
        else:
            out.append((stretch, before // half, -1) if own < half else (stretch, before // half, at))
        before += own
        previous = run
    return out


def spanned(first: Run, later: Run) -> Run:
    """`first` and `later` (the next run of the key in destination order) as one span."""
    return replace(first, origin_end=later.origin_end, dest_end=later.dest_end, last_timestamp=later.last_timestamp,
                   copied_at=max(first.copied_at or 0, later.copied_at or 0) or None,
                   copies=first.records + later.records)


def resolved(span: Run, offset: int, read: Iterable[Run]) -> Located:
    """Where `offset` lands inside `span`, from the runs of the copies read back in its `window`:
    the first copy at or after it. None of them (retention deleted the window, or its records
    carry no provenance of ours): the window's first offset, said as `window`, not exact; it
    reads again at most the window's records rather than skip one, and the caller moves it up to
    the log start."""
    # copies of origin offsets past the span's end are a rewound source's, which a cut took off it
    store = RunStore(kept for r in read if r.key == span.key
                     if (kept := cut(r, span.origin_end + 1, span.dest_end + 1)) is not None)
    found = store.locate(span.key, offset)
    if found.method == "exact" and found.offset is not None and span.dest_start <= found.offset <= span.dest_end:
        return Located(found.offset, "exact", span.origin_end)
    return Located(span_window(span, offset)[0], "window", span.origin_end, span_window(span, offset), span)


def reads_of(windows: Iterable[tuple[str, int, int, int]], close: int = MAX_SLACK
             ) -> list[dict[tuple[str, int], tuple[int, int]]]:
    """Windows (destination topic, partition, first, last) -> the reads that cover them, in
    rounds of one range [first, last] per partition (a round is read side by side): windows of a
    partition that overlap or lie within `close` offsets of each other are read as one range,
    so a hundred positions inside one span cost one read, and positions days apart two."""
    by_partition: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for topic, partition, first, last in sorted(windows):
        ranges = by_partition.setdefault((topic, partition), [])
        if ranges and first <= ranges[-1][1] + close:
            ranges[-1] = (ranges[-1][0], max(ranges[-1][1], last))
        else:
            ranges.append((first, last))
    rounds = max((len(r) for r in by_partition.values()), default=0)
    return [{tp: ranges[i] for tp, ranges in by_partition.items() if i < len(ranges)} for i in range(rounds)]


def store_in_spans(runs: Mapping[RunKey, list[Run]], floors: Mapping[tuple[str, int], int],
                   max_slack: int = MAX_SLACK, origin_cluster: str | None = None, pins: Pins | None = None
                   ) -> dict[RunKey, list[Run]]:
    """Each key's runs `in_spans` below its origin partition's floor, but for those its pins
    pin (a partition with no floor keeps its runs)."""
    pins = pins or {}
    return {key: in_spans(kept, floors[key[:2]], max_slack, origin_cluster, pins.get(key[:2], ()))
            if key[:2] in floors else list(kept)
            for key, kept in runs.items()}


def span_store(store: RunStore, origin_cluster: str, floors: Mapping[tuple[str, int], int],
               max_slack: int = MAX_SLACK, lock: AbstractContextManager[Any] | None = None,
               pins: Pins | None = None) -> int:
    """`store`'s runs of `origin_cluster` below the floors joined into spans; returns how many
    runs fewer it holds. `lock` (the store's) is held only to take the runs and to put the spans
    back, not while they are made: a key that changed meanwhile keeps its runs until next time."""
    lock = lock or nullcontext()
    with lock:
        held = store.snapshot()
    wanted = {key: runs for key, runs in held.items() if key[:2] in floors}
    joined = store_in_spans(wanted, floors, max_slack, origin_cluster, pins)
    fewer = 0
    with lock:
        for key, runs in joined.items():
            # the runs after the last one joined are kept as they were (the same objects), and only
            # what lies before them is put back: the copy may have grown the newest run meanwhile
            kept = unchanged_tail(held[key], runs)
            below, joined_below = held[key][:len(held[key]) - kept], runs[:len(runs) - kept]
            if len(joined_below) < len(below) and store.regroup(key, below, joined_below):
                fewer += len(below) - len(joined_below)
    return fewer


def unchanged_tail(runs: list[Run], joined: list[Run]) -> int:
    """How many of `runs`' last runs `joined` (`in_spans` of them) holds as they were."""
    kept = 0
    while kept < min(len(runs), len(joined)) and runs[-1 - kept] is joined[-1 - kept]:
        kept += 1
    return kept


class SpanBounds(NamedTuple):
    """Per source partition, the origin offset below which runs may become spans, and the idle
    positions below it that pin their runs (`pinned`)."""

    floors: dict[tuple[str, int], int]
    pins: dict[tuple[str, int], tuple[int, ...]]


def span_bounds(live: Iterable[LivePosition], counted: Mapping[tuple[str, int], int]) -> SpanBounds:
    """The floor is the copy's own counted position (every batch below it committed and its
    gaps told apart, so nothing below it is read again or asked of the store as a batch's own)
    lowered to the lowest active position there; idle positions below the floor pin. A
    partition the copy has not counted has neither."""
    active: dict[tuple[str, int], int] = {}
    idle: dict[tuple[str, int], set[int]] = {}
    for topic, partition, offset, still in live:
        if still:
            idle.setdefault((topic, partition), set()).add(offset)
        else:
            active[(topic, partition)] = min(offset, active.get((topic, partition), offset))
    floors = {key: min(at, active.get(key, at)) for key, at in counted.items()}
    pins = {key: tuple(sorted(p for p in idle[key] if p < floors[key])) for key in floors if key in idle}
    return SpanBounds(floors, {key: held for key, held in pins.items() if held})
