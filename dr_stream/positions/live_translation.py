"""A running flow's translation of group positions: new positions -> destination groups.

Positions arrive two ways. The translate query (`translate_query`) reads `__consumer_timestamps`
and hands over each batch's newest position per group and partition (`take_batch`); the batch
ends once they are translated, synced and in the translation log, so a position the query's
checkpoint has passed is never lost. A position from that topic is taken only once a commit on
the source backs it (`commit_backing`): anyone who may write the topic can write any group's
record, and a position synced never moves back. The flow's own poller hands over the positions it is about
to write to that topic as it writes them (`offer`): the step thread (`run`) translates them at
once, without waiting for the write, the next trigger and the read back; when their records
reach the query they change nothing, being the same positions.

Each position is translated through the flow's live offset index and (with
`offsets.sync_to_destination`) written to the destination group under the rules of
`group_sync`. A position that is not final yet (`next`, or `waiting` for the copy to pass it)
stays pending and is translated again each time the index advances. Every translation whose
outcome changed is recorded in the translation log: by the batch that brought it, or by a
second thread every `record_every_s`, so a Delta commit never delays a hand-over's sync; that
thread also compacts the log to its newest row per position every `compact_every_s`. A
restart takes back from that log the positions that were not final or not synced (`resume`),
since the query does not read again what its checkpoint has passed.

What it keeps follows what the source holds: the poller's full reads of the source's committed
offsets (`source_groups`) tell which positions are gone (`gone_positions`: a group deleted or
expired, a topic deleted), and once one has been gone for `gone.after_s` it leaves every map
here, the metric series read from them, and the translation log (a `gone` row, which the next
compaction drops with the position's older rows).

Invariants: one translation runs at a time, whichever thread asked for it; malformed records
are counted and said; a failure to sync one group is reported (once per cause, and once when it
heals) and does not stop the others; a position whose sync failed is translated and synced
again every `retry_s` (or as long as the failed round took, if longer) until a sync of it
succeeds or a newer position replaces it: the consumer that committed it may never commit again
(a group that stopped before a disaster), and a destination whose group coordinator is moving or
still loading refuses writes for a while. A position left alone because its group has members on
the destination is tried again every `held_retry_s` for the same reason: that group may empty (a
drill, an application moved back) while the source's position stays where it is. A round that
fails as a whole (a partition without its leader for a moment) leaves its positions due for the
next step, and fails its batch, which the query runs again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from dr_stream.core.config import OffsetsConfig
from dr_stream.core.contracts import CONSUMER_TIMESTAMPS_TOPIC, UNKNOWN_TIMESTAMP
from dr_stream.core.policy import GroupFilter, TopicFilter
from dr_stream.failure_notes import FailureNotes, first_line, named, summarised
from dr_stream.positions.commit_backing import CommitBacking
from dr_stream.positions.consumer_timestamps import GroupCommit
from dr_stream.positions.gone_positions import GONE, GonePositions, SourceGroups, groups_of
from dr_stream.positions.group_sync import GroupsRead, GroupSync, sync_translations
from dr_stream.positions.offset_translator import OffsetTranslator
from dr_stream.positions.sync_outcome import NOT_SYNCED, NOTHING, Synced
from dr_stream.positions.translation_log import TranslationLog
from dr_stream.positions.translation_rule import Translation

SETTLED = frozenset({"exact"})
Key = tuple[str, str, int]
# The longest the step thread sleeps with nothing to do: how soon it sees its stop.
IDLE_WAIT_S = 0.5


def _outcome(source_offset: int, offset: int | None, method: str, note: str | None, action: Synced
             ) -> tuple[Any, ...]:
    """What a translation log row says of a position: a translation is logged when this changes,
    whether it was made now or read back from the log at a restart."""
    return source_offset, offset, method, note, action.text


@dataclass
class LiveTranslation:
    translator: OffsetTranslator
    record: TranslationLog
    sync: GroupSync | None
    groups: GroupFilter
    topics: TopicFilter
    log: Callable[[str], None] = print
    record_every_s: float = 1.0
    # how often the translation log is compacted to its newest row per position (`compact`), and
    # the rows appended since that make it due sooner (a burst of commits)
    compact_every_s: float = 60.0
    compact_after_rows: int = 100_000
    retry_s: float = 2.0
    # how often a position left alone because its group has members on the destination is tried
    # again: the group may empty while its source position stays where it is
    held_retry_s: float = 10.0
    latest: dict[Key, GroupCommit] = field(default_factory=dict)
    pending: set[Key] = field(default_factory=set)
    totals: dict[str, int] = field(default_factory=lambda: {"commits": 0, "malformed": 0, "translations": 0,
                                                              "synced": 0, "sync_failures": 0,
                                                              "forgotten": 0, "unbacked": 0,
                                                              "unbacked_dropped": 0})
    # told each sync's actions (one per group and partition)
    on_synced: Callable[[list[Synced]], None] = lambda actions: None
    # told each round's duration, the positions it translated, and the time since the last ended
    on_round: Callable[[float, int, float], None] = lambda seconds, positions, period_s: None
    # told each compaction of the log: its duration, the rows it kept, its period
    on_upkeep: Callable[[float, int, float], None] = lambda seconds, rows, period_s: None
    # positions the source no longer holds are forgotten after `gone.after_s` (`offsets.gone_after`)
    gone: GonePositions = field(default_factory=lambda: GonePositions(after_s=OffsetsConfig().gone_after_s))
    # told the positions each forgetting forgot (the metrics count them; the poller deletes their
    # records from `__consumer_timestamps`)
    on_forgotten: Callable[[set[Key]], None] = lambda positions: None
    # which of the topic's positions a source commit backs; None takes every record as it is
    backing: CommitBacking | None = field(default_factory=CommitBacking)
    # told how many positions were held past the backing's grace, each time some were
    on_unbacked: Callable[[int], None] = lambda positions: None
    # told how many held positions were dropped (their group holds no offset there, or an hour
    # passed), each time some were
    on_unbacked_dropped: Callable[[int], None] = lambda positions: None
    # the poller's newest full read of the source, taken at the next step
    _source_groups: SourceGroups | None = None
    _round_ended: float | None = None
    # when each key's newest position arrived, while it waits for its first translation
    _arrived: dict[Key, float] = field(default_factory=dict)
    # when each key's position last moved (or was first seen, or taken back at start)
    _moved: dict[Key, float] = field(default_factory=dict)
    _recorded: dict[Key, tuple[Any, ...]] = field(default_factory=dict)
    _unrecorded: list[tuple[Translation, Synced]] = field(default_factory=list)
    _appended: int = 0  # rows appended to the log since its last compaction
    _compacted_at: float = field(default_factory=time.monotonic)
    _advanced: threading.Event = field(default_factory=threading.Event)
    # set by a hand-over or an index advance: the step thread has work
    _wake: threading.Event = field(default_factory=threading.Event)
    # positions handed over by `offer`, taken at the next step
    _offered: list[GroupCommit] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # held by whichever thread translates: the query's batch or the step thread
    _translating: threading.Lock = field(default_factory=threading.Lock)
    # held while the translation log is appended to: a batch's append and the recorder's
    _recording: threading.Lock = field(default_factory=threading.Lock)
    # positions whose last sync failed, and when they are tried again
    _unsynced: set[Key] = field(default_factory=set)
    _retry_at: float = 0.0
    # positions not synced because their group has members on the destination
    _held: set[Key] = field(default_factory=set)
    _held_retry_at: float = 0.0
    # positions taken whose round has not completed yet
    _due: set[Key] = field(default_factory=set)
    _failures: FailureNotes = field(init=False)

    def __post_init__(self) -> None:
        self._failures = FailureNotes(
            self.log, lambda group, cause: f"group {group}: offsets not synced: {cause} (retried every "
                                           f"{self.retry_s:g} s)",
            lambda group: f"group {group}: offsets synced again")

    def on_index_advanced(self) -> None:
        self._advanced.set()
        self._wake.set()

    def offer(self, commits: list[GroupCommit]) -> None:
        """Positions the flow's own poller is about to write to the topic, handed over at once
        (any thread). A record the query reads after them for the same key (a client helper's)
        still replaces them, as the topic's order says."""
        if self.backing is not None:
            self.backing.committed(commits)  # read off the source's own committed offsets
        with self._lock:
            self._offered.extend(commits)
        self._wake.set()

    def source_groups(self, read: SourceGroups) -> None:
        """What a full read of the source's committed offsets found (any thread): the step
        thread forgets the positions it has lacked for long enough."""
        if self.backing is not None:
            self.backing.source_read()
        with self._lock:
            self._source_groups = read
        self._wake.set()

    def resume(self, rows: Iterable[dict[str, Any]]) -> int:
        """Takes back, from the translation log's newest row per position, what a stopped run
        left undone: positions not final yet (translated again as the index advances) and
        positions whose sync failed (retried). Every row is taken as recorded, so a position
        translated the same way again is not written to the log twice. Returns how many were due."""
        due, taken, now = 0, [], time.monotonic()
        with self._translating:
            for row in rows:
                key = (row["group"], row["topic"], row["partition"])
                if not (self.groups.matches(key[0]) and self.topics.matches(key[1])):
                    continue
                timestamp = row["source_timestamp"]
                self.latest.setdefault(key, GroupCommit(*key, row["source_offset"],
                                                        UNKNOWN_TIMESTAMP if timestamp is None else timestamp))
                taken.append(key)
                if self.backing is not None:  # the flow's own record of what was taken
                    self.backing.committed([self.latest[key]])
                action = Synced.read(row["action"])
                self._recorded[key] = _outcome(row["source_offset"], row["offset"], row["method"], row["note"], action)
                if row["method"] not in SETTLED:
                    self.pending.add(key)
                if action.failed:
                    self._unsynced.add(key)
                if action.held:
                    self._held.add(key)
                if row["method"] not in SETTLED or action.failed:
                    self._due.add(key)
                    due += 1
        with self._lock:  # taken back counts as moving now: a position idles from the start on
            for key in taken:
                self._moved.setdefault(key, now)
        if due:
            self._wake.set()
        return due

    def take_batch(self, commits: list[GroupCommit], malformed: int = 0) -> list[tuple[Translation, Synced]]:
        """One batch of the translate query: its newest position per key, and how many of its
        records were malformed. Returns once the positions that changed are translated, synced
        and recorded; those whose outcome changed are returned with their action."""
        if malformed:
            self.totals["malformed"] += malformed
            self.log(f"{CONSUMER_TIMESTAMPS_TOPIC}: skipped {malformed} malformed records "
                     f"({self.totals['malformed']} so far)")
        if self.backing is not None:
            selected = [c for c in commits if self.groups.matches(c.group) and self.topics.matches(c.topic)]
            commits = [*self.backing.released(), *self.backing.backed(selected)]
        with self._translating:
            keys = self._take_commits(commits)
            changed = self._translate_due(keys)
        self.write_record()
        return changed

    def _take_commits(self, commits: Iterable[GroupCommit]) -> set[Key]:
        changed, moved = set(), set()
        for commit in commits:
            selected = self.groups.matches(commit.group) and self.topics.matches(commit.topic)
            held = self.latest.get(commit.key)
            if selected and held != commit:
                self.latest[commit.key] = commit
                changed.add(commit.key)
                if held is None or held.offset != commit.offset:
                    moved.add(commit.key)
        if changed:
            now = time.monotonic()
            with self._lock:
                for key in changed:
                    self._arrived.setdefault(key, now)
                for key in moved:
                    self._moved[key] = now
        self.totals["commits"] += len(changed)
        return changed

    def step(self) -> None:
        """Translates what was handed over, what waits on the index once it advanced, and the
        syncs due for a retry."""
        with self._lock:
            offered, self._offered = self._offered, []
            read, self._source_groups = self._source_groups, None
        if self.backing is not None:
            offered += self.backing.released()
            self._say_unbacked(self.backing, read)
        with self._translating:
            if read is not None:
                self._forget_gone(read)
            keys = self._take_commits(offered)
            if self._advanced.is_set():
                self._advanced.clear()
                keys |= self.pending
            if self._unsynced and time.monotonic() >= self._retry_at:
                keys |= self._unsynced
            if self._held and time.monotonic() >= self._held_retry_at:
                keys |= self._held
                self._held_retry_at = time.monotonic() + self.held_retry_s
            self._translate_due(keys)

    def _say_unbacked(self, backing: CommitBacking, read: SourceGroups | None) -> None:
        overdue = backing.overdue()
        for position, highest in overdue:
            shown = "none" if highest is None else str(highest)
            self.log(f"group {position.group}: {CONSUMER_TIMESTAMPS_TOPIC} says {position.topic}[{position.partition}] "
                     f"is at {position.offset}, but no commit on the source reached it for {backing.grace_s:g} s "
                     f"(highest seen: {shown}): not translated (a forged or stale record, or a group the flow may "
                     "not describe); taken once the group commits there")
        if overdue:
            self.totals["unbacked"] += len(overdue)
            self.on_unbacked(len(overdue))
        dead = backing.not_live(read) if read is not None else 0
        if dead:
            self.log(f"{CONSUMER_TIMESTAMPS_TOPIC}: {dead} unbacked positions dropped: their groups hold no "
                     f"committed offset on those partitions {backing.grace_s:g} s after they were read")
        expired = backing.expired()
        if expired:
            self.log(f"{CONSUMER_TIMESTAMPS_TOPIC}: {expired} positions no source commit backed within "
                     f"{backing.expire_s:g} s dropped")
        if dead + expired:
            self.totals["unbacked_dropped"] += dead + expired
            self.on_unbacked_dropped(dead + expired)

    def _translate_due(self, keys: set[Key]) -> list[tuple[Translation, Synced]]:
        """Translates `keys` and every position left due; on failure all of them stay due."""
        keys, self._due = keys | self._due, set()
        try:
            return self.translate(keys)
        except Exception:
            self._due |= keys
            raise

    def translate(self, keys: set[Key]) -> list[tuple[Translation, Synced]]:
        if not keys:
            return []
        began = time.monotonic()
        changed = self._translate(keys)
        took = time.monotonic() - began
        if self._unsynced & keys:
            # At least as long as this round took: a destination that is down does not keep the
            # loop busy retrying thousands of positions back to back.
            self._retry_at = time.monotonic() + max(self.retry_s, took)
        # The period reported with a round ends with it: from the end of the round before, so it
        # always covers the round it is reported with.
        ended = time.monotonic()
        self.on_round(took, len(keys), ended - self._round_ended if self._round_ended is not None else took)
        self._round_ended = ended
        return changed

    def _translate(self, keys: set[Key]) -> list[tuple[Translation, Synced]]:
        # the destination's groups are read while the positions are translated
        seen = self.sync.read_ahead({group for group, _, _ in keys}) if self.sync else None
        translations = self.translator.translate(self.latest[k] for k in sorted(keys))
        with self._lock:
            for key in keys:
                self._arrived.pop(key, None)
        self.totals["translations"] += len(translations)
        for t in translations:
            (self.pending.discard if t.method in SETTLED else self.pending.add)(t.key)
        actions = self._sync(self.sync, translations, seen) if self.sync else {}
        failed = {t.key for t in translations if actions.get(t.key, NOTHING).failed}
        self._unsynced = (self._unsynced - keys) | failed
        held = {t.key for t in translations if actions.get(t.key, NOTHING).held}
        if held - self._held:  # newly held: tried again a whole period from now
            self._held_retry_at = time.monotonic() + self.held_retry_s
        self._held = (self._held - keys) | held
        changed = []
        for t in translations:
            action = actions.get(t.key, NOTHING if self.sync else NOT_SYNCED)
            shape = _outcome(t.source_offset, t.offset, t.method, t.note, action)
            if self._recorded.get(t.key) != shape:
                self._recorded[t.key] = shape
                changed.append((t, action))
        with self._lock:
            self._unrecorded += changed
        return changed

    def _forget_gone(self, read: SourceGroups) -> None:
        """Drops the positions gone from the source for `gone.after_s`, and logs a `gone` row for
        each (what it last was, so a reader of the raw log sees why it ends there)."""
        gone = self.gone.gone(self.latest, read)
        if not gone:
            return
        now = int(time.time() * 1000)
        rows = [(self._gone_row(self.latest.pop(key), now), NOTHING) for key in sorted(gone)]
        for keys in (self.pending, self._unsynced, self._held, self._due):
            keys.difference_update(gone)
        for key in gone:
            self._recorded.pop(key, None)
        if self.backing is not None:
            self.backing.forget(gone)
        with self._lock:
            for key in gone:
                self._arrived.pop(key, None)
                self._moved.pop(key, None)
            self._unrecorded = [r for r in self._unrecorded if r[0].key not in gone] + rows
        left = {group for group, _, _ in self.latest}
        groups = groups_of(gone)
        self._failures.forget(g for g in groups if g not in left)
        self.totals["forgotten"] += len(gone)
        self.on_forgotten(gone)
        self.log(f"{len(gone)} positions forgotten: no committed offset on the source for {self.gone.after_s:g} s "
                 f"(groups {named(groups)}: deleted, expired, or their topics deleted)")

    def _gone_row(self, commit: GroupCommit, now: int) -> Translation:
        return Translation(group=commit.group, topic=commit.topic, partition=commit.partition,
                           source_offset=commit.offset, source_timestamp=commit.timestamp,
                           dest_topic=self.translator.renamer.format_remote_topic(commit.topic),
                           dest_partition=commit.partition, offset=None, method=GONE,
                           note="no committed offset on the source", clamped=False, log_start=None, log_end=None,
                           last_copied=None, source_log_end=None, translated_at=now)

    def still_for(self) -> dict[Key, float]:
        """Per position held, seconds since it last moved (any thread): the index's upkeep lets a
        position that stands still pin its run rather than hold every run above it exact."""
        now = time.monotonic()
        with self._lock:
            return {key: now - since for key, since in self._moved.items()}

    def untranslated_ages(self) -> dict[str, float]:
        """Per group seen, seconds its oldest position not translated yet has waited (0: none)."""
        now = time.monotonic()
        with self._lock:
            waiting = dict(self._arrived)
        ages = {group: 0.0 for group, _, _ in list(self.latest)}
        for (group, _, _), since in waiting.items():
            ages[group] = max(ages[group], now - since)
        return ages

    def _sync(self, sync: GroupSync, translations: list[Translation], seen: Future[GroupsRead] | None
              ) -> dict[Key, Synced]:
        actions = sync_translations(sync, translations, seen=seen)
        self.on_synced(list(actions.values()))
        self.totals["synced"] += sum(1 for a in actions.values() if a.wrote)
        failed = {t.group: actions[t.key].reason for t in translations if actions[t.key].failed}
        self.totals["sync_failures"] += len(failed)
        self._failures.round(failed, {t.group for t in translations if t.offset is not None})
        return actions

    def write_record(self) -> None:
        """Appends the changed translations to the translation log."""
        with self._recording:
            with self._lock:
                rows, self._unrecorded = self._unrecorded, []
            try:
                self.record.append(rows)
                with self._lock:
                    self._appended += len(rows)
            except Exception:
                with self._lock:
                    self._unrecorded = rows + self._unrecorded
                raise

    def compact_if_due(self) -> None:
        """Compacts the translation log when a period has passed or many rows arrived since the
        last compaction (and something was appended). Appends go on meanwhile: a batch's own
        append does not wait for it, and what it appends is kept."""
        due = time.monotonic() - self._compacted_at >= self.compact_every_s or self._appended >= self.compact_after_rows
        if not (due and self._appended):
            return
        began, appended = time.monotonic(), self._appended
        done = self.record.compact()
        with self._lock:
            self._appended -= appended
        self._compacted_at = time.monotonic()
        self.on_upkeep(time.monotonic() - began, done.rows_after if done else 0, self.compact_every_s)

    def _recorder(self, stop: threading.Event) -> None:
        failed = summarised(self.log)
        while not stop.wait(self.record_every_s):
            try:
                self.write_record()
                self.compact_if_due()
            except Exception as exc:  # storage briefly unavailable: kept and written next time
                failed(f"translation log: {first_line(exc)}")
        try:
            self.write_record()
        except Exception as exc:  # the session may be going down with the process
            self.log(f"translation log: last positions not appended at stop ({first_line(exc)}); the next "
                     "start translates them again (its poller reads every group's position at once)")

    def _wait_s(self) -> float:
        """How long the step thread may sleep: until the next retry is due, at most IDLE_WAIT_S."""
        if self._unsynced:
            return min(IDLE_WAIT_S, max(0.0, self._retry_at - time.monotonic()))
        return IDLE_WAIT_S

    def run(self, stop: threading.Event) -> None:
        """Translates hand-overs, index advances and retries until `stop` is set."""
        recorder = threading.Thread(target=self._recorder, args=(stop,), name="translation-log", daemon=True)
        recorder.start()
        failed = summarised(self.log)
        try:
            while not stop.is_set():
                self._wake.wait(self._wait_s())
                self._wake.clear()
                try:
                    self.step()
                except Exception as exc:  # a cluster briefly unreachable: report, keep translating
                    failed(f"translation: {first_line(exc)}")
                    stop.wait(1.0)
        finally:
            recorder.join(timeout=30)

    def close(self) -> None:
        """Once the query and the step thread are stopped: a batch may sync until its end."""
        self.translator.close()
        if self.sync is not None:
            self.sync.close()
