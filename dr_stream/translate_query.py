"""The translate query of one flow: `__consumer_timestamps` on the source -> translated offsets.

Each micro-batch takes the newest position per group and partition, translates it through
the offset index, records the translation and (with `offsets.sync_to_destination`) writes it
to the destination group under the rules of `offset_sync`. A position the index could not
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

from dr_stream.consumer_timestamps import TOPIC, GroupCommit, latest_per_partition, parse_consumer_timestamps
from dr_stream.offset_sync import OffsetSync
from dr_stream.policy import GroupFilter, TopicFilter
from dr_stream.translate import OffsetTranslator, Translation
from dr_stream.translation_log import TranslationLog

SETTLED = frozenset({"exact"})


@dataclass
class TranslateQuery:
    spark: SparkSession
    translator: OffsetTranslator
    record: TranslationLog
    sync: OffsetSync | None
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
        by_group: dict[str, list[Translation]] = {}
        for t in translations:
            if t.offset is not None:
                by_group.setdefault(t.group, []).append(t)
        actions = {t.key: f"not synced: {t.note}" for t in translations if t.offset is None}
        for group, items in sorted(by_group.items()):
            wanted = {(t.dest_topic, t.dest_partition): t.offset for t in items}
            try:
                done = {(a.topic, a.partition): a for a in self.sync.apply(group, wanted)}
            except Exception as exc:  # e.g. the group became active between the check and the write
                self.totals["sync_failures"] += 1
                self.log(f"group {group}: offsets not synced: {str(exc).splitlines()[0]}")
                for t in items:
                    actions[t.key] = f"sync failed: {str(exc).splitlines()[0]}"
                continue
            for t in items:
                a = done[(t.dest_topic, t.dest_partition)]
                actions[t.key] = a.action
                self.totals["synced"] += a.wrote
        return actions

    def start(self) -> StreamingQuery:
        options = {**self.kafka_options, "subscribe": TOPIC, "startingOffsets": "earliest",
                   # the topic is compacted: offsets missing from it are not data loss
                   "failOnDataLoss": "false"}
        return (
            self.spark.readStream.format("kafka").options(**options).load()
            .writeStream.queryName(self.query_name)
            .foreachBatch(self._on_batch)
            .option("checkpointLocation", self.checkpoint)
            .trigger(processingTime=self.trigger)
            .start()
        )
