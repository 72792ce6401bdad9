"""The offset-index query of one flow: the destination's copies -> runs in the offset index.

The query reads the flow's destination topics from their first record, keeps the records
whose newest provenance entry names this flow's source cluster, and appends their runs to
the Delta table (`index`). Every minute it also deletes runs whose records retention removed
and merges runs that batch boundaries split.

Invariant: an append and a rewrite never run at once, so a rewrite cannot drop the runs of an
append it did not see.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from dr_stream.offsets.index import OffsetIndex, copied_records, drop_deleted_runs, merge_adjacent_runs, to_runs
from dr_stream.policy import TopicRenamer
from dr_stream.streaming import start_batch_query


@dataclass
class OffsetIndexer:
    """The offset-index query of one flow, plus the periodic clean-up of its table.

    `on_advanced` runs after every append (the translator re-translates what was waiting for it).
    """

    spark: SparkSession
    index: OffsetIndex
    kafka_options: dict[str, str]
    source_cluster_id: str
    header: str
    renamer: TopicRenamer
    query_name: str
    checkpoint: str
    trigger: str
    log_starts: Callable[[], list[tuple[str, int, int]]]
    on_advanced: Callable[[], None] = lambda: None
    log: Callable[[str], None] = print
    maintenance_every_s: float = 60.0
    _last_maintenance: float = field(default_factory=time.monotonic)
    # Held while appending and while rewriting: a rewrite that missed a concurrent append
    # would drop that append's runs from the table.
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def _index_batch(self, batch: DataFrame, batch_id: int) -> None:
        runs = batch.transform(copied_records(self.source_cluster_id, self.header, self.renamer)).transform(to_runs)
        runs = runs.persist()
        try:
            appended = runs.count() > 0
            if appended:
                with self._lock:
                    self.index.append(runs)
        finally:
            runs.unpersist()
        if appended:
            self.on_advanced()
        if time.monotonic() - self._last_maintenance >= self.maintenance_every_s:
            self.maintain()

    def maintain(self) -> None:
        """Deletes runs whose records retention removed, and merges runs split by batch boundaries."""
        with self._lock:
            self._last_maintenance = time.monotonic()
            if not self.index.exists():
                return
            before = self.index.runs().count()
            starts = self.spark.createDataFrame(
                self.log_starts(), "dest_topic string, dest_partition int, log_start long"
            )
            kept = self.index.runs().transform(drop_deleted_runs(starts))
            merged = kept.transform(merge_adjacent_runs).localCheckpoint()
            after = merged.count()
            if after != before:
                self.index.rewrite(merged)
                self.log(f"offset index: {before} runs -> {after} (merged adjacent runs, dropped runs "
                         "whose records the destination deleted)")

    def start(self) -> StreamingQuery:
        return start_batch_query(self.spark, self.kafka_options, self.query_name, self._index_batch,
                                 self.checkpoint, self.trigger)
