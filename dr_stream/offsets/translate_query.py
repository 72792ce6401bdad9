"""The translate query of one flow: `__consumer_timestamps` on the source -> translated offsets.

Each micro-batch takes the newest position per group and partition, translates it through
the offset index, records the translation and (with `offsets.sync_to_destination`) writes it
to the destination group under the rules of `group_sync`. A position the index could not
place exactly yet (`next`: the records at or after it are still on their way) stays pending
and is translated again each time the offset index advances, so the destination follows
within seconds of the copy.

Invariants: malformed records are counted and skipped; a failure to sync one group is
reported and does not stop the others or the query.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from dr_stream.offsets.consumer_timestamps import TOPIC, GroupCommit, latest_per_partition, parse_consumer_timestamps
from dr_stream.offsets.group_sync import WRITES, GroupSync, sync_translations
from dr_stream.offsets.translation import Translation
from dr_stream.offsets.translation_log import TranslationLog
from dr_stream.offsets.translator import OffsetTranslator
from dr_stream.policy import GroupFilter, TopicFilter
from dr_stream.streaming import start_batch_query

SETTLED = frozenset({"exact"})


@dataclass
class TranslateQuery:
    spark: SparkSession
    translator: OffsetTranslator
    record: TranslationLog
    sync: GroupSync | None
    groups: GroupFilter
    topics: TopicFilter
    kafka_options: dict[str, str]
    query_name: str
    checkpoint: str
    trigger: str
    log: Callable[[str], None] = print
    latest: dict[tuple[str, str, int], GroupCommit] = field(default_factory=dict)
    pending: set[tuple[str, str, int]] = field(default_factory=set)
    totals: dict[str, int] = field(default_factory=lambda: {"commits": 0, "malformed": 0, "translations": 0,
                                                              "synced": 0, "sync_failures": 0})
    _recorded: dict[tuple[str, str, int], tuple] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def restore(self) -> None:
        """Picks up the positions known before a restart: they may still be waiting for the index."""
        for commit in self.record.last_commits():
            self.latest[commit.key] = commit
            self.pending.add(commit.key)

    def _on_batch(self, batch: DataFrame, batch_id: int) -> None:
        parsed = batch.transform(parse_consumer_timestamps).persist()
        try:
            malformed = parsed.where(F.col("_malformed")).count()
            rows = parsed.transform(latest_per_partition).collect()
        finally:
            parsed.unpersist()
        if malformed:
            self.totals["malformed"] += malformed
            self.log(f"{TOPIC}: skipped {malformed} malformed records in batch {batch_id} "
                     f"({self.totals['malformed']} so far)")
        commits = [GroupCommit(r.group, r.topic, r.partition, r.offset, r.timestamp) for r in rows
                   if self.groups.matches(r.group) and self.topics.matches(r.topic)]
        with self._lock:
            keys = set()
            for c in commits:
                if self.latest.get(c.key) != c:
                    self.latest[c.key] = c
                    keys.add(c.key)
            self.totals["commits"] += len(keys)
            self._translate(keys | self.pending)

    def on_index_advanced(self) -> None:
        with self._lock:
            if self.pending:
                self._translate(set(self.pending))

    def _translate(self, keys: set[tuple[str, str, int]]) -> None:
        if not keys:
            return
        translations = self.translator.translate(self.latest[k] for k in sorted(keys))
        self.totals["translations"] += len(translations)
        for t in translations:
            (self.pending.discard if t.method in SETTLED else self.pending.add)(t.key)
        actions = self._sync(translations) if self.sync else {}
        changed = []
        for t in translations:
            action = actions.get(t.key, "not synced (sync_to_destination off)" if not self.sync else "")
            shape = (t.source_offset, t.offset, t.method, t.note, action)
            if self._recorded.get(t.key) != shape:
                self._recorded[t.key] = shape
                changed.append((t, action))
        self.record.append(changed)

    def _sync(self, translations: list[Translation]) -> dict[tuple[str, str, int], str]:
        actions = sync_translations(self.sync, translations)
        self.totals["synced"] += sum(1 for a in actions.values() if a in WRITES)
        failed = {t.group: actions[t.key] for t in translations if actions[t.key].startswith("failed")}
        for group, action in sorted(failed.items()):
            self.totals["sync_failures"] += 1
            self.log(f"group {group}: offsets not synced: {action.removeprefix('failed: ')}")
        return actions

    def start(self) -> StreamingQuery:
        return start_batch_query(self.spark, self.kafka_options, self.query_name, self._on_batch,
                                 self.checkpoint, self.trigger)

    def close(self) -> None:
        self.translator.close()
