"""The translate query of one flow: `__consumer_timestamps` -> translated destination groups.

A Structured Streaming query beside the replicate query, with its own checkpoint
(`<checkpoint_dir>/translate`): Spark's Kafka source reads the source cluster's
`__consumer_timestamps`, dr-stream's Java reader turns each record into a position
(`position_records`), and each micro-batch's newest position per group and partition goes to
the flow's `LiveTranslation`, which joins it with the live offset index, syncs the destination
group and records the outcome in the translation log before the batch ends. Spark's UI, its
progress events and the flow's metrics show it like the replicate query.

It always runs micro-batches, also when the replicate query runs in real-time mode: positions
are a few bytes per group and partition, and the commits that matter most for latency (the
poller's) are handed over in process before they reach the topic. Its trigger is short so a
client helper's commit is translated within about `TRIGGER_MS` plus a batch; a trigger that finds
nothing new costs one look at the topic's end offsets.

Invariant: a batch ends only once each of its positions was translated and recorded (a failure
fails the batch, and the query runs it again from its checkpoint), so a restart need not read
the topic again: what was left pending comes back from the translation log (`LiveTranslation.resume`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from dr_stream.core.config import FlowConfig
from dr_stream.core.contracts import UNKNOWN_TIMESTAMP
from dr_stream.kafka import spark_options
from dr_stream.kafka.cluster_context import FlowClusters
from dr_stream.kafka.group_offsets.kafka4 import Kafka4Groups, StreamsGroupStates
from dr_stream.positions.consumer_timestamps import GroupCommit
from dr_stream.positions.gone_positions import GonePositions
from dr_stream.positions.group_sync import GroupSync
from dr_stream.positions.live_translation import LiveTranslation
from dr_stream.positions.offset_translator import Locate, OffsetTranslator
from dr_stream.positions.position_records import group_positions, newest_positions
from dr_stream.positions.returned_records import ReturnedRecords, maps_back
from dr_stream.positions.sync_outcome import Synced
from dr_stream.positions.translation_log import TranslationLog
from dr_stream.runtime.delta_appends import DeltaAppends
from dr_stream.runtime.unfinished_writes import drop_unfinished_writes

TRIGGER_MS = 200


def batch_commits(rows: list[Any]) -> tuple[list[GroupCommit], int]:
    """`newest_positions` rows -> the positions and the count of malformed records."""
    commits = [GroupCommit(p["group"], p["topic"], p["partition"], p["offset"],
                           UNKNOWN_TIMESTAMP if p["timestamp"] is None else p["timestamp"])
               for p in (r["position"] for r in rows) if p is not None]
    return commits, sum(int(r["malformed"] or 0) for r in rows)


@dataclass
class TranslateQuery:
    spark: SparkSession
    config: FlowConfig
    translation: LiveTranslation
    log: Callable[[str], None] = print

    @classmethod
    def of(cls, spark: SparkSession, config: FlowConfig, clusters: FlowClusters, locate: Locate,
           destination_cluster_id: str, log: Callable[[str], None], origin: str | None = None,
           kafka4: Kafka4Groups | None = None,
           appends: DeltaAppends | None = None, on_synced: Callable[[list[Synced]], None] = lambda actions: None,
           on_round: Callable[[float, int, float], None] = lambda seconds, positions, period_s: None,
           on_upkeep: Callable[[float, int, float], None] = lambda seconds, rows, period_s: None,
           on_forgotten: Callable[[set[tuple[str, str, int]]], None] = lambda positions: None,
           on_unconfirmed: Callable[[str], None] = lambda topic: None,
           on_unbacked: Callable[[int], None] = lambda positions: None,
           on_unbacked_dropped: Callable[[int], None] = lambda positions: None,
           ) -> TranslateQuery:
        """The flow's translation through its live offset index (`locate`), and its query; its
        commits name `origin`, the source's cluster.id. With `offsets.streams_groups`, the
        destination's Streams groups are described through `kafka4`. `on_synced` hears each
        round's sync outcomes, `on_round` its duration, positions and period, `on_upkeep` each
        compaction of the translation log's, `on_forgotten` the positions gone from the source
        it forgot, `on_unconfirmed` the source topic of each provenance claim the destination did
        not confirm, `on_unbacked` how many positions of `__consumer_timestamps` no source commit
        backed in time and `on_unbacked_dropped` how many of those it dropped (the metrics)."""
        def unconfirmed(topic: str, line: str) -> None:
            log(line)
            on_unconfirmed(topic)

        returned = (ReturnedRecords(clusters.source, config.provenance.header, destination_cluster_id,
                                    destination=clusters.destination, on_unconfirmed=unconfirmed)
                    if maps_back(config) else None)
        translator = OffsetTranslator(locate, config.renamer, clusters.destination, source=clusters.source,
                                      returned=returned, header=config.provenance.header)
        translation = LiveTranslation(
            translator=translator, record=TranslationLog(config.streaming.translations, spark=spark,
                                                         appends=appends or DeltaAppends(log),
                                                         retention_s=config.streaming.old_versions_retention_s),
            sync=GroupSync(clusters.destination, config.name, batched=True, origin=origin,
                           streams=StreamsGroupStates(kafka4, config.destination)
                           if kafka4 and config.offsets.streams_groups else None)
            if config.offsets.sync_to_destination
            else None,
            groups=config.group_filter, topics=config.topic_filter, log=log, on_synced=on_synced, on_round=on_round,
            on_upkeep=on_upkeep, gone=GonePositions(after_s=config.offsets.gone_after_s), on_forgotten=on_forgotten,
            on_unbacked=on_unbacked, on_unbacked_dropped=on_unbacked_dropped,
        )
        return cls(spark, config, translation, log)

    def resume(self) -> None:
        """Takes back what the last run left pending from the translation log (said in one line)."""
        due = self.translation.resume(self.translation.record.latest())
        if due:
            self.log(f"translation: {due} positions a stopped run left not final or not synced are translated "
                     "again (from the translation log)")

    def start(self) -> StreamingQuery:
        checkpoint = self.config.translate_checkpoint
        dropped = drop_unfinished_writes(self.spark, checkpoint)
        if dropped:
            self.log(f"checkpoint {checkpoint}: removed {len(dropped)} files a stopped run left half-written "
                     f"({', '.join(dropped)}); no batch had completed, so the translate query reads "
                     "__consumer_timestamps from its first record")
        records = self.spark.readStream.format("kafka").options(**spark_options.positions_source(self.config)).load()
        return (
            records.writeStream.queryName(self.config.translate_query)
            .foreachBatch(self.batch)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=f"{TRIGGER_MS} milliseconds")
            .start()
        )

    def batch(self, records: DataFrame, batch_id: int) -> None:
        """One micro-batch: its newest positions translated, synced and recorded."""
        rows = records.transform(group_positions).transform(newest_positions).collect()
        commits, malformed = batch_commits(rows)
        changed = self.translation.take_batch(commits, malformed)
        if changed:
            shown = ", ".join(f"{t.group} {t.topic}[{t.partition}] {t.source_offset} -> {t.offset} ({t.method})"
                              for t, _ in changed[:3])
            self.log(f"translate batch {batch_id}: {len(commits)} positions, {len(changed)} translated anew: "
                     f"{shown}" + (" ..." if len(changed) > 3 else ""))
