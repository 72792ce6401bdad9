"""The runs a flow knows, held in memory, and the lookup that translation is built on.

A *run* says that origin offsets [origin_start, origin_end] of one source partition were
copied to destination offsets [dest_start, dest_end] of one destination partition, one to
one and in order. The sink reports runs as it writes (jvm/ `CopyProducer`), and
a scan of the destination rebuilds the ones a crash kept from being reported.

`RunStore` is the rule with no I/O (MirrorMaker 2's `OffsetSyncStore` plays the same part):
it takes runs in any order and any number of times, and answers "where did the first record
at or after origin offset C land?".

A source topic deleted and created again starts its offsets over, and its copies go on further
down the same destination partitions: `begin_life` says from which destination offset on the
copies are of the new topic. Runs below that are the old topic's and are kept out, so they never
place a group of the new topic, nor make a resume mark skip its records.

Invariants: per (origin partition, destination partition) the stored runs have disjoint
destination ranges in ascending order, none below its partition's life start; a run that
overlaps or continues a stored one is merged with it only when both describe the same mapping
(equal distance from origin to destination offset), since two reports of one record always
agree; every answer is computed from stored runs only, so a record never reported is never
claimed.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import pairwise

# (origin topic, origin partition, destination topic, destination partition)
RunKey = tuple[str, int, str, int]


@dataclass(frozen=True)
class Run:
    origin_cluster: str
    origin_topic: str
    origin_partition: int
    dest_topic: str
    dest_partition: int
    origin_start: int
    origin_end: int
    dest_start: int
    dest_end: int
    first_timestamp: int | None = None
    last_timestamp: int | None = None
    copied_at: int | None = None
    # a span (`spans`): at least this many of the offsets on each side are copies; None: a run,
    # one to one
    copies: int | None = None

    @property
    def key(self) -> RunKey:
        return self.origin_topic, self.origin_partition, self.dest_topic, self.dest_partition

    @property
    def records(self) -> int:
        return self.dest_end - self.dest_start + 1 if self.copies is None else self.copies

    @property
    def uncopied(self) -> int:
        """Origin offsets inside the run that may not be copies (at most; 0 for a one-to-one run)."""
        return self.origin_end - self.origin_start + 1 - self.records

    @property
    def foreign(self) -> int:
        """Destination offsets inside the run that may not be copies of ours (at most)."""
        return self.dest_end - self.dest_start + 1 - self.records

    @property
    def slack(self) -> int:
        """Offsets on the two sides together that may not be copies: a span's window is at most
        this plus one records wide."""
        return self.uncopied + self.foreign

    @property
    def shift(self) -> int:
        """Destination offset minus origin offset, the same for every record of the run."""
        return self.dest_start - self.origin_start

    def joins(self, later: Run) -> bool:
        """`later` starts inside or right after this run and maps offsets the same way (a span
        maps no one offset: it joins nothing)."""
        return (later.dest_start <= self.dest_end + 1 and later.shift == self.shift
                and self.copies is None and later.copies is None)

    def merged(self, later: Run) -> Run:
        last = later if later.dest_end >= self.dest_end else self
        return replace(
            self, origin_end=max(self.origin_end, later.origin_end), dest_end=last.dest_end,
            last_timestamp=last.last_timestamp, copied_at=max(self.copied_at or 0, later.copied_at or 0) or None,
        )


@dataclass(frozen=True)
class Located:
    """Where origin offset C of a partition is on the destination, as far as the runs say.

    method: `exact` (a copied record at or after C), `next` (everything before C was copied and
    nothing at or after it yet: just after the last copied record), `waiting` (records before C
    may still be on their way, so no position is safe yet), `unknown` (no run for the partition),
    `within` (inside a span: the copy is in `window`, destination offsets [first, last], and
    `spans.resolved` places it once they are read), `window` (a window read back held no copy:
    its first offset, not exact).
    """

    offset: int | None
    method: str
    last_copied: int | None
    window: tuple[int, int] | None = None
    span: Run | None = None  # the span a `within` answer is inside


def gaps_between(first: int, end: int, copied: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The ranges [a, b) of [first, end) outside every copied range (first, last), in order."""
    gaps, at = [], first
    for lo, hi in sorted(copied):
        if lo >= end:
            break
        if lo > at:
            gaps.append((at, lo))
        at = max(at, hi + 1)
    if at < end:
        gaps.append((at, end))
    return gaps


class RunStore:
    """Runs by (origin partition, destination partition); constructing one does no I/O."""

    def __init__(self, runs: Iterable[Run] = (), life_starts: dict[tuple[str, int], int] | None = None,
                 rewinds: dict[tuple[str, int], list[tuple[int, int]]] | None = None) -> None:
        self._runs: dict[RunKey, list[Run]] = {}
        # destination partition -> the offset its copies of the current source topic start at
        self._life_starts: dict[tuple[str, int], int] = {}
        # destination partition -> (origin offset, destination offset) of each rewind of its source
        self._rewinds: dict[tuple[str, int], list[tuple[int, int]]] = {}
        # keys whose runs are not in origin order on the destination: a restart copied records a
        # failed write had left out after records past them (`resume.unwritten_below`)
        self._disordered: set[RunKey] = set()
        # the disordered keys' runs in origin order, made at their first lookup since they changed
        self._by_origin: dict[RunKey, ByOrigin] = {}
        for dest, offset in (life_starts or {}).items():
            self.begin_life(dest, offset)
        for dest, cuts in (rewinds or {}).items():
            for origin_first, dest_offset in cuts:
                self.rewind(dest, origin_first, dest_offset)
        for run in runs:
            self.add(run)

    def begin_life(self, dest: tuple[str, int], offset: int) -> None:
        """The copies in destination partition `dest` from `offset` on are of a source topic
        created anew: the runs below it go, and any reported again is not taken."""
        if offset <= self._life_starts.get(dest, -1):
            return
        self._life_starts[dest] = offset
        self._by_origin.clear()
        for key, runs in self._runs.items():
            if (key[2], key[3]) == dest:
                runs[:] = [r for r in runs if r.dest_start >= offset]

    def rewind(self, dest: tuple[str, int], origin_first: int, dest_offset: int) -> None:
        """The source partition copied to `dest` was cut back to `origin_first` (an unclean
        election, a truncation) and writes new records from there, whose copies start at
        `dest_offset`: the runs below it keep only their records below `origin_first`, and any
        reported again is cut the same way."""
        cuts = self._rewinds.setdefault(dest, [])
        if (origin_first, dest_offset) in cuts:
            return
        cuts.append((origin_first, dest_offset))
        self._by_origin.clear()
        for key, runs in self._runs.items():
            if (key[2], key[3]) == dest:
                runs[:] = [kept for r in runs if (kept := cut(r, origin_first, dest_offset)) is not None]

    def add(self, run: Run) -> None:
        if run.dest_start < self._life_starts.get((run.dest_topic, run.dest_partition), 0):
            return
        for origin_first, dest_offset in self._rewinds.get((run.dest_topic, run.dest_partition), ()):
            kept = cut(run, origin_first, dest_offset)
            if kept is None:
                return
            run = kept
        runs = self._runs.setdefault(run.key, [])
        self._by_origin.pop(run.key, None)
        at = bisect_left(runs, run.dest_start, key=lambda r: r.dest_start)
        if at > 0 and runs[at - 1].copies is not None and run.dest_start <= runs[at - 1].dest_end:
            # a report of copies a span already stands for: only what lies past the span is new
            rest = past(run, runs[at - 1].dest_end)
            if rest is None:
                return
            run = rest
        if at < len(runs) and runs[at].dest_start == run.dest_start:
            if run.shift != runs[at].shift:
                runs[at] = run  # the destination was recreated: the newer report describes it
            elif run.dest_end <= runs[at].dest_end:
                return  # an older report of a run already known in full
            else:
                runs[at] = runs[at].merged(run)
        else:
            insort(runs, run, key=lambda r: r.dest_start)
        if ((at > 0 and runs[at - 1].origin_end >= runs[at].origin_start)
                or (at + 1 < len(runs) and runs[at + 1].origin_start <= runs[at].origin_end)):
            self._disordered.add(run.key)
        self._merge_around(runs, at)

    @staticmethod
    def _merge_around(runs: list[Run], at: int) -> None:
        i = max(at - 1, 0)
        while i + 1 < len(runs):
            if runs[i].joins(runs[i + 1]):
                runs[i] = runs[i].merged(runs.pop(i + 1))
            elif i >= at:
                return
            else:
                i += 1

    def drop_deleted(self, log_starts: dict[tuple[str, int], int]) -> int:
        """Forgets runs whose every record is below its destination partition's log start (retention
        removed them); returns how many went."""
        dropped = 0
        for key, runs in list(self._runs.items()):
            start = log_starts.get((key[2], key[3]))
            if start is None:
                continue
            kept = [r for r in runs if r.dest_end >= start]
            if len(kept) != len(runs):  # the upkeep asks every minute: a key untouched keeps its order
                self._by_origin.pop(key, None)
            dropped += len(runs) - len(kept)
            runs[:] = kept
            if not kept:  # a key is kept only while it has runs: the store follows what is live
                del self._runs[key]
                self._disordered.discard(key)
            elif key in self._disordered and all(a.origin_end < b.origin_start for a, b in pairwise(kept)):
                self._disordered.discard(key)  # retention took the runs copied out of order
        return dropped

    def forget(self, dests: Iterable[tuple[str, int]]) -> int:
        """Forgets destination partitions `dests` (their topic was deleted): their runs and what
        the store held of them; returns how many runs went."""
        gone = set(dests)
        dropped = 0
        self._by_origin.clear()
        for key in [k for k in self._runs if (k[2], k[3]) in gone]:
            dropped += len(self._runs.pop(key))
            self._disordered.discard(key)
        for dest in gone:
            self._life_starts.pop(dest, None)
            self._rewinds.pop(dest, None)
        return dropped

    def held_from(self) -> dict[tuple[str, int], int]:
        """(origin topic, partition) -> the lowest origin offset of a copy the store knows of."""
        out: dict[tuple[str, int], int] = {}
        for key, runs in self._runs.items():
            if runs:
                out[key[:2]] = min(out.get(key[:2], runs[0].origin_start), min(r.origin_start for r in runs))
        return out

    def destinations(self) -> set[tuple[str, int]]:
        """The destination partitions the store holds runs of."""
        return {(key[2], key[3]) for key in self._runs}

    def snapshot(self) -> dict[RunKey, list[Run]]:
        """Each key's runs as they stand (copies of the lists, not of the runs)."""
        return {key: list(runs) for key, runs in self._runs.items()}

    def regroup(self, key: RunKey, held: list[Run], fewer: list[Run]) -> bool:
        """`key`'s first runs `held` (from a `snapshot`) replaced by `fewer`, which stand for the
        same copies (`spans.span_store`; runs out of origin order among them kept as they are),
        unless those runs changed since; runs after them (the copy goes on there) are kept. True if
        replaced."""
        runs = self._runs.get(key)
        if runs is None or len(runs) < len(held) \
                or any(a is not b for a, b in zip(runs, held, strict=False)):
            return False
        runs[:len(held)] = fewer
        self._by_origin.pop(key, None)
        return True

    def extend(self, runs: Iterable[Run]) -> None:
        for run in runs:
            self.add(run)

    def __iter__(self) -> Iterator[Run]:
        for key in sorted(self._runs):
            yield from self._runs[key]

    def __len__(self) -> int:
        return sum(len(r) for r in self._runs.values())

    def runs_of(self, key: RunKey) -> list[Run]:
        return list(self._runs.get(key, ()))

    def last(self, key: RunKey) -> Run | None:
        runs = self._runs.get(key)
        return runs[-1] if runs else None

    def copied_from(self, origin: tuple[str, int], first: int) -> list[tuple[int, int]]:
        """The origin offset ranges (first, last) of `origin` (topic, partition) copied at or past
        `first`, in origin order."""
        ranges = [(max(r.origin_start, first), r.origin_end) for (topic, partition, _, _), runs in self._runs.items()
                  if (topic, partition) == origin for r in runs if r.origin_end >= first]
        return sorted(ranges)

    def uncopied(self, origin: tuple[str, int], first: int, end: int) -> list[tuple[int, int]]:
        """The ranges [a, b) of origin offsets in [first, end) of `origin` no known run copied. A
        batch just committed asks of its own offsets, so the runs are read from the newest back
        to the first that ends before them (a partition is copied in origin order, unless a
        restart copied records a failed write had left out: then every run is read)."""
        copied = []
        for key, runs in self._runs.items():
            if (key[0], key[1]) != origin:
                continue
            for run in reversed(runs):
                if run.origin_end < first:
                    if key not in self._disordered:
                        break
                    continue
                if run.origin_start < end:
                    copied.append((max(run.origin_start, first), run.origin_end))
        return gaps_between(first, end, copied)

    def last_copied(self) -> dict[tuple[str, int], int]:
        """(origin topic, partition) -> the highest origin offset copied."""
        out: dict[tuple[str, int], int] = {}
        for key, runs in self._runs.items():
            if runs:
                out[key[:2]] = max(out.get(key[:2], -1), self._furthest(key, runs))
        return out

    def uncovered(self, bounds: dict[tuple[str, int], tuple[int, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        """Per destination partition ((topic, partition) -> (log start, log end)), the offsets
        [first, end) past its last known run: where copies no run reported can only be."""
        covered: dict[tuple[str, int], int] = {}
        for (_, _, topic, partition), runs in self._runs.items():
            if runs:
                covered[(topic, partition)] = max(covered.get((topic, partition), -1), runs[-1].dest_end)
        out = {}
        for dest, (start, end) in bounds.items():
            rewound = max((d for _, d in self._rewinds.get(dest, ())), default=0)
            first = max(start, covered.get(dest, -1) + 1, self._life_starts.get(dest, 0), rewound)
            if first < end:
                out[dest] = (first, end)
        return out

    def locate(self, key: RunKey, offset: int, processed_through: int | None = None,
               gated: bool = False) -> Located:
        """Where origin offset `offset` lands (`translation` applies the rest of the rule).

        `gated`: a `next` answer needs `processed_through` (the origin offset below which the flow
        has handled every record, copied or skipped, and reported its runs) to be past `offset`;
        otherwise records before `offset` may still land after the last known one, and the answer
        is `waiting`; so is a partition with no run yet that the copy has not passed. Ungated (the
        flow is not running), `next` and `unknown` are given as the runs stand.
        """
        runs = self._runs.get(key)
        behind = gated and (processed_through is None or processed_through < offset)
        if not runs:
            # Nothing copied from the partition yet: while the copy has not passed the offset, its
            # records are on their way and the timestamp fallback would place the group too early.
            return Located(None, "waiting" if behind else "unknown", None)
        last, furthest = runs[-1], self._furthest(key, runs)
        if key in self._disordered:
            # the first destination offset holding a record at or past `offset`: a consumer from
            # there misses none of them (it may read again records copied late, below `offset`)
            placed = self._by_origin_of(key, runs).place(offset)
            if isinstance(placed, Run):  # a span made before a late copy arrived below it: its window places it
                return Located(None, "within", furthest, span_window(placed, offset), placed)
            if placed is not None:
                return Located(placed, "exact", furthest)
        else:
            at = bisect_left(runs, offset, key=lambda r: r.origin_end)
            if at < len(runs):
                found = runs[at]
                if found.copies is not None and offset > found.origin_start:
                    return Located(None, "within", furthest, span_window(found, offset), found)
                return Located(found.dest_start + max(offset - found.origin_start, 0), "exact", furthest)
        if behind:
            return Located(None, "waiting", furthest)
        return Located(last.dest_end + 1, "next", furthest)

    def _furthest(self, key: RunKey, runs: list[Run]) -> int:
        """The highest origin offset among `runs`, the runs of `key` in destination order."""
        return self._by_origin_of(key, runs).furthest if key in self._disordered else runs[-1].origin_end

    def _by_origin_of(self, key: RunKey, runs: list[Run]) -> ByOrigin:
        """`key`'s runs in origin order, made once per change of them: a failover asks a key
        once per group, and a key copied out of order may hold thousands of runs."""
        held = self._by_origin.get(key)
        if held is None:
            held = self._by_origin[key] = ByOrigin(runs)
        return held


class ByOrigin:
    """One key's runs in origin order, for the lookup of a key whose runs are not in origin
    order on the destination: the first destination offset holding a copy at or past an origin
    offset C is the lowest of the runs starting at or past C (their first offset: a suffix
    minimum) and of the runs holding C (C's own place in each). The runs holding C all start
    below it and reach it: read back from the last start below C while the prefix maximum of
    origin ends still reaches C, so a lookup reads the runs around C, not the key."""

    def __init__(self, runs: list[Run]) -> None:
        self.runs = sorted(runs, key=lambda r: r.origin_start)
        self.starts = [r.origin_start for r in self.runs]
        self.reach: list[int] = []  # the highest origin end among runs[:i + 1]
        for r in self.runs:
            self.reach.append(max(r.origin_end, self.reach[-1]) if self.reach else r.origin_end)
        self.lowest_after: list[int | None] = [None] * (len(self.runs) + 1)  # min dest_start of runs[i:]
        for i in range(len(self.runs) - 1, -1, -1):
            after = self.lowest_after[i + 1]
            self.lowest_after[i] = self.runs[i].dest_start if after is None else min(after, self.runs[i].dest_start)
        self.furthest = self.reach[-1] if self.reach else -1

    def place(self, offset: int) -> int | Run | None:
        """The first destination offset holding a copy at or past `offset`; the span (first in
        destination order) that holds `offset` past its first origin offset, whose window places
        it instead; None when no run reaches `offset`."""
        at = bisect_left(self.starts, offset)
        best = self.lowest_after[at]
        inside: Run | None = None
        i = at - 1
        while i >= 0 and self.reach[i] >= offset:
            run = self.runs[i]
            if run.origin_end >= offset:
                if run.copies is not None:
                    if inside is None or run.dest_start < inside.dest_start:
                        inside = run
                else:
                    here = run.dest_start + offset - run.origin_start
                    best = here if best is None else min(best, here)
            i -= 1
        return inside if inside is not None else best


def span_window(span: Run, offset: int) -> tuple[int, int]:
    """The destination offsets [first, last] of `span` that hold the first copy at or after origin
    offset `offset` (inside its origin range): with c copies before it in the span, u uncopied
    origin offsets and f foreign destination offsets, it sits at dest_start + c + f, where
    c = offset - origin_start - u; u and f are at most `Run.uncopied` and `Run.foreign`."""
    at = offset - span.origin_start
    return (max(span.dest_start, span.dest_start + at - span.uncopied),
            min(span.dest_end, span.dest_start + at + span.foreign))


def cut(run: Run, origin_first: int, dest_offset: int) -> Run | None:
    """`run` less its records at or past `origin_first`, if it lies below `dest_offset` (copies
    of records the source took back); None when nothing is left of it. A span cut keeps its
    destination range (where its last kept copy is is not known) and lowers its copies by the
    origin offsets it loses, so its windows stay right."""
    if run.dest_start >= dest_offset or run.origin_end < origin_first:
        return run
    if run.origin_start >= origin_first:
        return None
    end = origin_first - 1
    if run.copies is not None:
        return replace(run, origin_end=end, copies=max(1, run.copies - (run.origin_end - end)))
    return replace(run, origin_end=end, dest_end=run.dest_start + (end - run.origin_start))


def past(run: Run, dest_offset: int) -> Run | None:
    """The part of `run` (one to one) above destination offset `dest_offset`; None if none."""
    if run.dest_end <= dest_offset:
        return None
    if run.dest_start > dest_offset:
        return run
    skipped = dest_offset + 1 - run.dest_start
    return replace(run, origin_start=run.origin_start + skipped, dest_start=dest_offset + 1)


def coalesced(reports: Iterable[tuple[Run, int | None]]) -> list[tuple[Run, int | None]]:
    """Run reports, each with its offset in the runs topic (None: rebuilt from the destination)
    -> the fewest runs that describe the same records, by the store's own rule: per origin
    cluster and run key, in destination order, a report that `joins` the run before it is merged
    into it. A merged run carries the latest runs topic offset of its reports (None only when
    none had one), so a reader resumes the topic past every report it stands for."""
    by_key: dict[tuple[str, RunKey], list[tuple[Run, int | None]]] = {}
    for run, at in reports:
        by_key.setdefault((run.origin_cluster, run.key), []).append((run, at))
    out: list[tuple[Run, int | None]] = []
    for group in by_key.values():
        group.sort(key=lambda r: (r[0].dest_start, r[0].origin_start))
        current, at = group[0]
        for run, later_at in group[1:]:
            if current.joins(run):
                current = current.merged(run)
                at = later_at if at is None else at if later_at is None else max(at, later_at)
            else:
                out.append((current, at))
                current, at = run, later_at
        out.append((current, at))
    return out
