"""Keeps a flow's offset index current: runs topic -> memory (`RunStore`) -> Delta table.

The sink's producer publishes runs as it writes (`runs_topic`). The feed reads them as they
come, so the translate loop sees a copied record's destination offset within milliseconds of
its acknowledgement. A second thread appends them to the Delta table every `write_every_s` for
`status`, `failover` and the notebooks, the reports of one growing run as one row
(`coalesced`), and every `maintenance_every_s` looks whether the table needs its upkeep, which
rewrites it to what it keeps (`kept_runs`: runs of one stretch merged, runs whose records the
destination deleted dropped) and deletes the files that rewrite replaced once no reader can
need them (`runtime.delta_upkeep`): only when the destination deleted records of a known run,
or the table took `merge_after_rows` rows (at least as many as the runs it knows) since it was
last kept. The rewrite runs in delta-rs on the driver (milliseconds for thousands of rows), in
Spark only where delta-rs cannot open the table, and never on the feed's own thread: a Spark
upkeep there once held runs from the translate loop for seconds every minute.

`catch_up` runs before the replicate query writes anything (at start and after a query
restart): it reads the runs topic to its end, then scans each destination partition from just
past its last known run to its log end for records this flow copied that no run reported (the
producer died between the acknowledgement and the publication), so the store covers every
copy on the destination before a single new record is written. The Delta table gets the
scanned ones at the feed's next round, beside the query's start rather than before it (those
on the runs topic at its usual round). The scan reads all those partitions side by side in
the driver (`destination_tail`, the reader and rule a failover uses too) with a deadline,
`scan_timeout_s`: a scan that does not finish by it leaves its partitions in `unscanned`,
which the flow reports; they resume from the index's marks, at-least-once for the copies past
them.

`handled` (`handled_offsets`) says, per source partition, below which origin offset the
replicate query has handled every record and the feed holds the runs of those copies, from the
runs read and the batches committed, and which offsets committed batches read past without a copy.

Invariants: the store only holds reported or scanned runs (never a record that is not on the
destination); the Delta table receives every run the store receives, at least once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dr_stream.core.policy import TopicRenamer
from dr_stream.failure_notes import first_line, summarised
from dr_stream.index.destination_tail import TailTimedOut, read_tail
from dr_stream.index.gone_partitions import GONE, gone_partitions
from dr_stream.index.handled_offsets import HandledOffsets, Spans
from dr_stream.index.index_reads import run_of
from dr_stream.index.index_table import OffsetIndex
from dr_stream.index.run_store import Located, Run, RunKey, RunStore, coalesced
from dr_stream.index.runs_topic import RunsRead, RunsReader, RunsTrim
from dr_stream.index.spans import MAX_SLACK, LivePosition, SpanBounds, span_bounds, span_store
from dr_stream.kafka.cluster_context import ClusterContext

Partition = tuple[str, int]
# How often the table's thread looks whether an append or an upkeep is due.
TABLE_TURN_S = 1.0


@dataclass
class IndexFeed:
    spark: SparkSession
    index: OffsetIndex
    destination: ClusterContext
    runs_topic: str
    source_cluster_id: str
    header: str
    renamer: TopicRenamer
    # (destination topic, partition) -> (log start, log end) of the flow's destination partitions
    dest_bounds: Callable[[], dict[Partition, tuple[int, int]]]
    # every destination topic and its partition count: runs of partitions it lost go
    # (`gone_partitions`; the default lists nothing, so nothing goes)
    dest_topics: Callable[[], Mapping[str, int]] = dict
    log: Callable[[str], None] = print
    write_every_s: float = 30.0
    maintenance_every_s: float = 60.0
    # rows appended since the last merge before the upkeep merges them (or the runs known, if more)
    merge_after_rows: int = 1000
    # the longest a (re)start spends reading the destination past the index (`_fill_gaps`)
    scan_timeout_s: float = 60.0
    # destination partition -> the [first, end) a timed-out start-up scan left unread
    unscanned: dict[Partition, tuple[int, int]] = field(default_factory=dict)
    # told each time the store or the processed offsets moved: a feed round, or a restart's catch-up
    on_advanced: Callable[[], None] = lambda: None
    # told every run read from the runs topic, in publication order (not runs rebuilt at start)
    on_runs: Callable[[list[Run]], None] = lambda runs: None
    # told each upkeep of the table: its duration, the rows it kept, how often it is looked at
    on_upkeep: Callable[[float, int, float], None] = lambda seconds, rows, period_s: None
    # the positions the flow's groups hold on source partitions: runs below the lowest active
    # one and below the copy's own become spans at the upkeep, but for those idle ones pin (`spans`)
    live_positions: Callable[[], Iterable[LivePosition]] = list
    max_slack: int = MAX_SLACK
    # deletes from the runs topic what the table has held a while (None: the topic's retention
    # alone bounds it)
    trim: RunsTrim | None = None
    # told, after each rewrite of the table, what the destination still holds: per source
    # partition the lowest origin offset of a copy there, per destination partition its log
    # start, and its topics (the ledger of losses keeps what still matters, `losses.outlived`)
    on_kept: Callable[[Mapping[Partition, int], Mapping[Partition, int], set[str]], None] = \
        lambda held_from, starts, topics: None
    store: RunStore = field(default_factory=RunStore)
    malformed: int = 0
    # the table read without Spark while the session started (`IndexReads.runs_and_positions`);
    # None, or a read that failed: `load` reads it through Spark
    prefetched: Future[Any] | None = None
    _reader: RunsReader | None = None
    _unwritten: list[tuple[Run, int | None]] = field(default_factory=list)
    _last_write: float = field(default_factory=time.monotonic)
    _last_maintenance: float = field(default_factory=time.monotonic)
    _rows_unmerged: int = 0  # rows the table holds that no upkeep has merged yet (at most)
    _deleted_unkept: bool = False  # the store forgot deleted runs the table still holds
    _missed: set[Partition] = field(default_factory=set)  # partitions the last look did not find
    _gone_unkept: set[Partition] = field(default_factory=set)  # gone partitions the table still holds
    handled: HandledOffsets = field(default_factory=HandledOffsets)
    # `_reading` is held while the runs topic is read (the feed thread, and `catch_up` from the
    # replicate query's start); `_lock` only while the store changes or is asked, so a
    # translation never waits for a read; `_table` keeps an append and a rewrite apart, since a
    # rewrite that missed a concurrent append would drop its runs.
    _reading: threading.RLock = field(default_factory=threading.RLock)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _table: threading.RLock = field(default_factory=threading.RLock)

    # -- start ---------------------------------------------------------------------------------

    def load(self) -> None:
        """The Delta table into memory; the runs topic is read from where the table left off."""
        runs, position = self._taken_prefetch() or self._read_table()
        self.store.extend(runs)
        self._rows_unmerged = len(runs)
        self._reader = RunsReader(self.destination, self.runs_topic, None if position is None else position + 1)

    def _read_table(self) -> tuple[list[Run], int | None]:
        frame = self.index.runs().where(F.col("origin_cluster") == self.source_cluster_id)
        rows = frame.collect()  # one read of the table: the resume point comes from the same rows
        at = "runs_topic_offset" if "runs_topic_offset" in frame.columns else None
        reported = [r[at] for r in rows if at and r[at] is not None]
        return [run_of(r) for r in rows], max(reported) if reported else None

    def _taken_prefetch(self) -> tuple[list[Run], int | None] | None:
        if self.prefetched is None:
            return None
        prefetched, self.prefetched = self.prefetched, None
        try:
            runs, positions = prefetched.result(timeout=self.scan_timeout_s)
        except Exception as exc:  # e.g. a location deltalake cannot open (hdfs://): Spark reads it
            self.log(f"offset index: read through Spark ({first_line(exc)})")
            return None
        return [r for r in runs if r.origin_cluster == self.source_cluster_id], positions.get(self.source_cluster_id)

    def catch_up(self, mark: Callable[[str], None] = lambda phase: None) -> None:
        """Everything reported, then everything on the destination no report covers; `mark` is
        told the end of each step (a restart's time is mostly here)."""
        with self._reading:
            if self._reader is None:
                self.load()
            got = self._read_to_end()
            mark("runs topic")
            rebuilt = self._fill_gaps()
            mark("destination scan")
        if got.runs or rebuilt:
            # The feed thread will not read these runs again: a position waiting for them (a
            # group committed just before this restart) is translated now, not at the next copy.
            self.on_advanced()
        if rebuilt:
            # Runs only the scan found are appended by the feed's next round, beside the query's
            # start instead of before it (until then the destination still holds them). Runs the
            # topic holds wait for the usual round: a Delta append in a JVM that has just started
            # took a second of CPU from the catch-up that follows every restart.
            with self._lock:
                self._last_write = float("-inf")

    def _started(self) -> RunsReader:
        if self._reader is None:
            raise RuntimeError("the index feed reads the runs topic once started (`start`)")
        return self._reader

    def _read_to_end(self, timeout: float = 30.0) -> RunsRead:
        """Takes every run published up to now; callers hold `_reading`."""
        got = self._started().read_to_end(timeout)
        self._take(got.runs, got.malformed)
        return got

    def _fill_gaps(self) -> bool:
        """True when it rebuilt runs from the destination."""
        bounds = self.dest_bounds()
        with self._lock:
            gaps = self.store.uncovered(bounds)
        self.unscanned = {}
        if not gaps:
            return False
        try:
            found = self._scan(gaps)
        except TailTimedOut:
            # The marks of these partitions stay those of the index: their copies past it may be
            # written again. Said once here, and by the flow for each partition (`unscanned`).
            self.unscanned = dict(gaps)
            self.log(f"offset index: the destination's records past the last known run of {len(gaps)} partitions "
                     f"({sum(e - f for f, e in gaps.values())} records) were not read within "
                     f"{self.scan_timeout_s:g} s; those partitions resume from the index's marks")
            return False
        self._take([(None, r) for r in found], 0)
        if found:
            records = sum(r.records for r in found)
            self.log(f"offset index: {records} copied records had no published run (the producer stopped "
                     f"before publishing); rebuilt {len(found)} runs from the destination")
        return bool(found)

    def _scan(self, gaps: dict[Partition, tuple[int, int]]) -> list[Run]:
        """Every gap read side by side, given up whole after `scan_timeout_s` (TailTimedOut)."""
        return read_tail(self.destination, gaps, self.header, self.source_cluster_id, self.renamer,
                         deadline_s=self.scan_timeout_s)

    # -- running -------------------------------------------------------------------------------

    def _take(self, runs: Sequence[tuple[int | None, Run]], malformed: int) -> None:
        """Runs with their offset in the runs topic (None: rebuilt from the destination)."""
        with self._lock:
            for at, run in runs:
                if run.origin_cluster != self.source_cluster_id:
                    continue
                self.store.add(run)
                self._unwritten.append((run, at))
                # The copy reads each partition in offset order: a record copied at origin offset
                # E means every record before it was handled (copied or skipped) already.
                if at is not None:
                    self.handled.run_published((run.origin_topic, run.origin_partition), run.origin_end)
        published = [run for at, run in runs if at is not None and run.origin_cluster == self.source_cluster_id]
        if published:
            self.on_runs(published)
        if malformed:
            self.malformed += malformed
            self.log(f"{self.runs_topic}: skipped {malformed} reports that are not runs ({self.malformed} so far)")

    def replicated(self, ends: Mapping[Partition, int], spans: Spans | None = None) -> None:
        """The replicate query committed a batch ending at these source offsets (its progress);
        `spans`, (start offsets, end offsets) of a batch some of whose offsets may have delivered
        no record, asks for the ranges it copied nothing of (`take_uncopied`)."""
        if ends:
            with self._lock:
                self.handled.batch_committed(ends, spans)

    def take_uncopied(self) -> dict[Partition, list[tuple[int, int]]]:
        """The origin ranges [first, end) committed batches read past without copying a record
        (`RunStore.uncopied`) since the last call: records filtered out, transaction markers, and
        records deleted before they were read."""
        with self._lock:
            return self.handled.take_uncopied()

    def locate(self, key: RunKey, offset: int) -> Located:
        """Where `offset` lands, `next` only once the flow has handled every record before it."""
        with self._lock:
            return self.store.locate(key, offset, self.handled.through.get((key[0], key[1])), gated=True)

    def begin_lives(self, lives: dict[Partition, int]) -> None:
        """The copies in each destination partition from its offset on are of a recreated source
        topic (`RunStore.begin_life`): the old topic's runs leave the store."""
        with self._lock:
            for dest, offset in lives.items():
                self.store.begin_life(dest, offset)

    def copy_at(self, origin: Partition, dest: Partition, offset: int) -> int | None:
        """The destination offset of the copy of a source record, or None when the index knows none."""
        with self._lock:
            for run in self.store.runs_of((*origin, *dest)):
                if run.copies is not None:  # a span maps its two ends only (`spans`)
                    if offset in (run.origin_start, run.origin_end):
                        return run.dest_start if offset == run.origin_start else run.dest_end
                elif run.origin_start <= offset <= run.origin_end:
                    return run.dest_start + offset - run.origin_start
        return None

    def rewind(self, cuts: dict[Partition, tuple[int, int]]) -> None:
        """Each destination partition's source was cut back to an origin offset and writes new
        records from there, copied from a destination offset on (`RunStore.rewind`)."""
        with self._lock:
            for dest, (origin_first, dest_offset) in cuts.items():
                self.store.rewind(dest, origin_first, dest_offset)

    def last_copied(self) -> dict[Partition, int]:
        with self._lock:
            return self.store.last_copied()

    def copied_from(self, origin: Partition, first: int) -> list[tuple[int, int]]:
        """The origin ranges of a source partition copied at or past `first` (`RunStore.copied_from`)."""
        with self._lock:
            return self.store.copied_from(origin, first)

    def next_to_handle(self) -> dict[Partition, int]:
        """Per source partition, the next origin offset the flow has neither copied nor skipped."""
        with self._lock:
            return self.handled.next_to_handle(self.store.last_copied())

    def step(self, timeout: float = 0.1) -> bool:
        """One round: read new reports and apply the batch progress they complete. True when the
        store or the processed offsets moved."""
        with self._reading:
            got = self._started().read(timeout=timeout)
            self._take(got.runs, got.malformed)
            return self._apply_progress() or bool(got.runs)

    def keep_table(self) -> None:
        """The table's turn: appends what it does not hold yet and runs its upkeep, when due."""
        now = time.monotonic()
        if self._unwritten and now - self._last_write >= self.write_every_s:
            self.write()
        if now - self._last_maintenance >= self.maintenance_every_s:
            self.maintain_if_due()

    def _apply_progress(self) -> bool:
        """A batch's progress counts once the feed has read the runs topic as far as it reached
        when the progress arrived (every run of that batch was published before it committed)."""
        moved = False
        while True:
            with self._lock:
                batch = self.handled.first_waiting()
            if batch is None:
                return moved
            if batch.runs_needed is None:
                needed = self._started().end()
                with self._lock:
                    batch.runs_needed = needed
            if (self._started().position or 0) < (batch.runs_needed or 0):
                return moved
            with self._lock:
                moved = self.handled.count_first(self.store) or moved

    def run(self, stop: threading.Event) -> None:
        """Feeds until `stop` is set, telling `on_advanced` each time something moved. The table
        is kept by a second thread, so neither an append nor an upkeep delays a run's way from
        the runs topic to the translate loop."""
        table = threading.Thread(target=self._keep_table_until, args=(stop,), name="offset-index-table", daemon=True)
        table.start()
        failed = summarised(self.log)
        try:
            while not stop.is_set():
                try:
                    if self.step():
                        self.on_advanced()
                except Exception as exc:  # the destination may be briefly unreachable: report, keep going
                    failed(f"offset index feed: {first_line(exc)}")
                    stop.wait(1.0)
        finally:
            table.join(timeout=60)
        self.write()

    def _keep_table_until(self, stop: threading.Event) -> None:
        failed = summarised(self.log)
        while not stop.wait(TABLE_TURN_S):
            try:
                self.keep_table()
            except Exception as exc:  # storage briefly unavailable: what waits is written next time
                failed(f"offset index table: {first_line(exc)}")

    # -- the Delta table -----------------------------------------------------------------------

    def write(self) -> None:
        with self._table:
            with self._lock:
                pending, self._unwritten = self._unwritten, []
                self._last_write = time.monotonic()
            if pending:
                rows = coalesced(pending)
                try:
                    self.index.append_runs(rows)
                except Exception:
                    with self._lock:
                        self._unwritten = pending + self._unwritten
                    raise
                self._rows_unmerged += len(rows)
                published = [at for _, at in pending if at is not None]
                if published and self.trim is not None:
                    self.trim.appended(max(published))

    def maintain_if_due(self) -> None:
        """The upkeep, when the destination deleted records of a known run or enough rows wait
        to be merged; otherwise only the look, from memory and one request for log starts."""
        self._last_maintenance = time.monotonic()
        bounds = self.dest_bounds()
        spans = self._keep_memory(bounds)
        with self._lock:
            known = len(self.store)
        if self._deleted_unkept or self._rows_unmerged >= max(self.merge_after_rows, known):
            self._keep_table(bounds, spans)

    def maintain(self) -> None:
        """The upkeep now, due or not: drops runs whose records retention removed, joins spans,
        trims the runs topic and merges rows of one run."""
        bounds = self.dest_bounds()
        self._keep_table(bounds, self._keep_memory(bounds))

    def _keep_memory(self, bounds: dict[Partition, tuple[int, int]]) -> SpanBounds:
        """The upkeep's part outside the table, due or not: the store forgets deleted topics and
        runs, joins spans below the floors, and the runs topic is trimmed; returns the floors and
        pins, which the table's rewrite takes too."""
        self._forget_gone()
        if self._forget_deleted(bounds):
            self._deleted_unkept = True
        spans = self._span_bounds()
        span_store(self.store, self.source_cluster_id, spans.floors, self.max_slack, self._lock, spans.pins)
        if self.trim is not None:
            self.trim.trim()
        return spans

    def _forget_deleted(self, bounds: dict[Partition, tuple[int, int]]) -> bool:
        """The store forgets runs below each destination partition's log start; True if any."""
        with self._lock:
            return self.store.drop_deleted({dest: start for dest, (start, _) in bounds.items()}) > 0

    def _forget_gone(self) -> None:
        """The store forgets the destination partitions deleted topics took (`gone_partitions`);
        the table drops their rows at its rewrite, which this makes due."""
        with self._lock:
            held = self.store.destinations()
        gone, self._missed = gone_partitions(held, self.dest_topics(), self.runs_topic, self._missed)
        if not gone:
            return
        with self._lock:
            dropped = self.store.forget(gone)
        self._gone_unkept |= gone
        self._deleted_unkept = True
        topics = sorted({topic for topic, _ in gone})
        self.log(f"offset index: {len(gone)} destination partitions of deleted topics forgotten ({dropped} runs): "
                 f"{', '.join(topics[:6])}{', ...' if len(topics) > 6 else ''}")

    def _span_bounds(self) -> SpanBounds:
        """Per source partition, the offset spans may not reach (the lowest active position, and
        no further than the copy's last counted batch) and the idle positions that pin their runs:
        one look serves the store and the table, so both join the same runs."""
        with self._lock:
            counted = dict(self.handled.counted)
        return span_bounds(self.live_positions(), counted)

    def _keep_table(self, bounds: dict[Partition, tuple[int, int]], spans: SpanBounds) -> None:
        """The table's rows of runs below the log starts dropped and rows of one run merged
        (`kept_runs`). What waited for it is cleared only once it is done: a failed rewrite is
        tried again."""
        with self._table:
            self._last_maintenance = began = time.monotonic()
            gone = set(self._gone_unkept)
            starts = {dest: start for dest, (start, _) in bounds.items()} | dict.fromkeys(gone, GONE)
            done = self.index.keep(starts, self.source_cluster_id, spans.floors, self.max_slack, spans.pins)
            self._gone_unkept -= gone
            if done is not None:
                took = time.monotonic() - began
                self.on_upkeep(took, done.rows_after, self.maintenance_every_s)
                if done.rows_after != done.rows_before:
                    self.log(f"offset index: {done.rows_before} rows -> {done.rows_after} in {took:.1f} s (merged "
                             "rows of one run, joined rows below every live position into spans, dropped runs "
                             "whose records the destination deleted)")
            self._rows_unmerged, self._deleted_unkept = 0, False
        with self._lock:
            held_from = self.store.held_from()
        try:
            self.on_kept(held_from, {dest: start for dest, (start, _) in bounds.items()}, set(self.dest_topics()))
        except Exception as exc:  # the index is kept; what the ledger keeps is looked at next time
            self.log(f"losses ledger upkeep: {first_line(exc)}; tried again at the next upkeep")

    def close(self) -> None:
        """Reads the runs topic to its end and appends what the table does not hold yet, then
        closes the runs reader: a stopped flow leaves the table complete. The flow closes the feed
        after its queries stopped, so the runs of their last batches are on the topic by then;
        the feed thread itself stops with the flow and may not have read them."""
        try:
            if self._reader is not None:
                with self._reading:
                    self._read_to_end(timeout=10.0)
            if self._unwritten:
                self.write()
        except Exception as exc:  # the session may be going down with the process
            self.log(f"offset index: last runs not appended at stop ({exc}); the next start reads them from "
                     f"{self.runs_topic}")
        if self._reader is not None:
            self._reader.close()
