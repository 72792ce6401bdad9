"""The translate loop of one flow: `__consumer_timestamps` on the source -> destination groups.

A driver thread, not a Spark query: the positions are a few bytes per group and partition, and
what matters is the delay from a commit on the source to the same position on the destination.
The loop reads the topic as records arrive (the poller writes unmodified consumers' commits
there and hands the same positions over in process as it writes them, so they are translated
without waiting for the write and its read back; the client helper writes the others),
translates the newest position per group and partition through the flow's live offset index,
and (with `offsets.sync_to_destination`) writes it to the destination group under the rules of
`group_sync`. A position that is not final yet (`next`, or `waiting` for the copy to pass it)
stays pending and is translated again each time the index advances.

Every translation whose outcome changed is recorded in the translation log by a second thread,
so a Delta commit never delays a sync.

Invariants: malformed records are counted and skipped; a failure to sync one group is
reported (once per cause, and once when it heals) and does not stop the others or the loop; a
position whose sync failed is translated and synced again every `retry_s` (or as long as the
failed round took, if longer) until a sync of it succeeds or a newer position replaces it: the
consumer that committed it may never commit again (a group that stopped before a disaster), and a
destination whose group coordinator is moving or still loading refuses writes for a while. For
the same reason a round that fails as a whole (a partition without its leader for a moment)
leaves its positions due for the next round: the records that brought them are not read again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from dr_stream.core.config import ClusterConfig
from dr_stream.core.contracts import CONSUMER_TIMESTAMPS_TOPIC
from dr_stream.core.policy import GroupFilter, TopicFilter
from dr_stream.failure_notes import FailureNotes, first_line
from dr_stream.kafka import clients
from dr_stream.positions.consumer_timestamps import TOMBSTONE, GroupCommit, parse_commit
from dr_stream.positions.group_sync import WRITES, GroupsRead, GroupSync, sync_translations
from dr_stream.positions.offset_translator import OffsetTranslator
from dr_stream.positions.translation_log import TranslationLog
from dr_stream.positions.translation_rule import Translation

SETTLED = frozenset({"exact"})
Key = tuple[str, str, int]


@dataclass
class LiveTranslation:
    source: ClusterConfig
    translator: OffsetTranslator
    record: TranslationLog
    sync: GroupSync | None
    groups: GroupFilter
    topics: TopicFilter
    log: Callable[[str], None] = print
    record_every_s: float = 1.0
    retry_s: float = 2.0
    latest: dict[Key, GroupCommit] = field(default_factory=dict)
    pending: set[Key] = field(default_factory=set)
    totals: dict[str, int] = field(default_factory=lambda: {"commits": 0, "malformed": 0, "translations": 0,
                                                              "synced": 0, "sync_failures": 0})
    # told each sync's actions (one per group and partition)
    on_synced: Callable[[list[str]], None] = lambda actions: None
    # told each round's duration, the positions it translated, and the time since the last ended
    on_round: Callable[[float, int, float], None] = lambda seconds, positions, period_s: None
    _round_ended: float | None = None
    # when each key's newest position arrived, while it waits for its first translation
    _arrived: dict[Key, float] = field(default_factory=dict)
    _recorded: dict[Key, tuple] = field(default_factory=dict)
    _unrecorded: list[tuple[Translation, str]] = field(default_factory=list)
    _advanced: threading.Event = field(default_factory=threading.Event)
    # positions handed over by `offer`, taken at the next step
    _offered: list[GroupCommit] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # positions whose last sync failed, and when they are tried again
    _unsynced: set[Key] = field(default_factory=set)
    _retry_at: float = 0.0
    # positions taken from the topic whose round has not completed yet
    _due: set[Key] = field(default_factory=set)
    _failures: FailureNotes = field(init=False)

    def __post_init__(self) -> None:
        self._failures = FailureNotes(
            self.log, lambda group, cause: f"group {group}: offsets not synced: {cause} (retried every "
                                           f"{self.retry_s:g} s)",
            lambda group: f"group {group}: offsets synced again")

    def on_index_advanced(self) -> None:
        self._advanced.set()

    def offer(self, commits: list[GroupCommit]) -> None:
        """Positions the flow's own poller is about to write to the topic, handed over at once
        (any thread): the loop translates them without waiting for the write and the read back.
        When their records arrive they change nothing, being the same positions; a record
        written after them for the same key (a client helper's) still replaces them, as the
        topic's order says."""
        with self._lock:
            self._offered.extend(commits)

    def take(self, records: list[tuple[bytes | None, bytes | None]]) -> set[Key]:
        """Records of the topic -> the keys whose newest position changed."""
        commits, malformed = [], 0
        for key, value in records:
            commit = parse_commit(key, value)
            if commit is None:
                malformed += 1
            elif commit != TOMBSTONE:
                commits.append(commit)
        if malformed:
            self.totals["malformed"] += malformed
            self.log(f"{CONSUMER_TIMESTAMPS_TOPIC}: skipped {malformed} malformed records "
                     f"({self.totals['malformed']} so far)")
        return self._take_commits(commits)

    def _take_commits(self, commits: list[GroupCommit]) -> set[Key]:
        changed = set()
        for commit in commits:
            selected = self.groups.matches(commit.group) and self.topics.matches(commit.topic)
            if selected and self.latest.get(commit.key) != commit:
                self.latest[commit.key] = commit
                changed.add(commit.key)
        if changed:
            now = time.monotonic()
            with self._lock:
                for key in changed:
                    self._arrived.setdefault(key, now)
        self.totals["commits"] += len(changed)
        return changed

    def step(self, consumer: Consumer, timeout: float = 0.1) -> None:
        with self._lock:
            offered, self._offered = self._offered, []
        self._due |= self._take_commits(offered)
        messages = consumer.consume(num_messages=10000, timeout=0 if offered else timeout)
        self._due |= self.take([(m.key(), m.value()) for m in messages if m.error() is None])
        if self._advanced.is_set():
            self._advanced.clear()
            self._due |= self.pending
        if self._unsynced and time.monotonic() >= self._retry_at:
            self._due |= self._unsynced
        keys, self._due = self._due, set()
        try:
            self.translate(keys)
        except Exception:
            # the consumer has moved past these records: they are translated next round, not lost
            self._due |= keys
            raise

    def translate(self, keys: set[Key]) -> None:
        if not keys:
            return
        began = time.monotonic()
        self._translate(keys)
        took = time.monotonic() - began
        if self._unsynced & keys:
            # At least as long as this round took: a destination that is down does not keep the
            # loop busy retrying thousands of positions back to back.
            self._retry_at = time.monotonic() + max(self.retry_s, took)
        # Rounds follow the commits and the index, one after the other. The period reported with a
        # round ends with it: from the end of the round before, so it always covers the round it
        # is reported with (start to start would cover the previous one, shorter or longer).
        ended = time.monotonic()
        self.on_round(took, len(keys), ended - self._round_ended if self._round_ended is not None else took)
        self._round_ended = ended

    def _translate(self, keys: set[Key]) -> None:
        # the destination's groups are read while the positions are translated
        seen = self.sync.read_ahead({group for group, _, _ in keys}) if self.sync else None
        translations = self.translator.translate(self.latest[k] for k in sorted(keys))
        with self._lock:
            for key in keys:
                self._arrived.pop(key, None)
        self.totals["translations"] += len(translations)
        for t in translations:
            (self.pending.discard if t.method in SETTLED else self.pending.add)(t.key)
        actions = self._sync(translations, seen) if self.sync else {}
        failed = {t.key for t in translations if actions.get(t.key, "").startswith("failed")}
        self._unsynced = (self._unsynced - keys) | failed
        changed = []
        for t in translations:
            action = actions.get(t.key, "not synced (sync_to_destination off)" if not self.sync else "")
            shape = (t.source_offset, t.offset, t.method, t.note, action)
            if self._recorded.get(t.key) != shape:
                self._recorded[t.key] = shape
                changed.append((t, action))
        with self._lock:
            self._unrecorded += changed

    def untranslated_ages(self) -> dict[str, float]:
        """Per group seen, seconds its oldest position not translated yet has waited (0: none)."""
        now = time.monotonic()
        with self._lock:
            waiting = dict(self._arrived)
        ages = {group: 0.0 for group, _, _ in list(self.latest)}
        for (group, _, _), since in waiting.items():
            ages[group] = max(ages[group], now - since)
        return ages

    def _sync(self, translations: list[Translation], seen: Future[GroupsRead] | None) -> dict[Key, str]:
        actions = sync_translations(self.sync, translations, seen=seen)
        self.on_synced(list(actions.values()))
        self.totals["synced"] += sum(1 for a in actions.values() if a in WRITES)
        failed = {t.group: actions[t.key].removeprefix("failed: ") for t in translations
                  if actions[t.key].startswith("failed")}
        self.totals["sync_failures"] += len(failed)
        self._failures.round(failed, {t.group for t in translations if t.offset is not None})
        return actions

    def write_record(self) -> None:
        """Appends the changed translations to the translation log."""
        with self._lock:
            rows, self._unrecorded = self._unrecorded, []
        try:
            self.record.append(rows)
        except Exception:
            with self._lock:
                self._unrecorded = rows + self._unrecorded
            raise

    def _recorder(self, stop: threading.Event) -> None:
        while not stop.wait(self.record_every_s):
            try:
                self.write_record()
            except Exception as exc:  # storage briefly unavailable: kept and written next time
                self.log(f"translation log: {first_line(exc)}")
        try:
            self.write_record()
        except Exception as exc:  # the session may be going down with the process
            self.log(f"translation log: last positions not appended at stop ({first_line(exc)}); the next "
                     f"start translates them again from {CONSUMER_TIMESTAMPS_TOPIC}")

    def run(self, stop: threading.Event) -> None:
        """Translates until `stop` is set; its consumer lives exactly as long as this call."""
        recorder = threading.Thread(target=self._recorder, args=(stop,), name="translation-log", daemon=True)
        recorder.start()
        try:
            with clients.consuming(self.source, "dr-stream-translate", {"fetch.wait.max.ms": 50}) as consumer:
                assigned = False
                while not stop.is_set():
                    try:
                        if not assigned and not (assigned := _assign_all(consumer)):
                            stop.wait(0.5)
                            continue
                        self.step(consumer)
                    except Exception as exc:  # a cluster briefly unreachable: report, keep translating
                        self.log(f"translate loop: {first_line(exc)}")
                        stop.wait(1.0)
        finally:
            recorder.join(timeout=30)
            if self.sync is not None:
                self.sync.close()

    def close(self) -> None:
        self.translator.close()


def _assign_all(consumer: Consumer) -> bool:
    """Reads every partition of the topic from its first record (it is compacted: the newest
    position per key is all there is). False while its metadata is incomplete: a topic created a
    moment ago can be listed with an error and no partitions, and assigning those would read
    nothing, ever."""
    topic = consumer.list_topics(CONSUMER_TIMESTAMPS_TOPIC, timeout=10).topics.get(CONSUMER_TIMESTAMPS_TOPIC)
    if topic is None or topic.error is not None or not topic.partitions:
        return False
    consumer.assign([TopicPartition(CONSUMER_TIMESTAMPS_TOPIC, p, OFFSET_BEGINNING) for p in sorted(topic.partitions)])
    return True

