"""A flow's Delta tables as the commands read them: the offset index, the translation log, the
ledger of losses and the holds of partitions at refused records.

All are read through one `DeltaReads`, so a command sees one snapshot of each table and
reports a fall back to Spark once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dr_stream.core.config import FlowConfig, sibling
from dr_stream.index import IndexReads
from dr_stream.positions import TranslationLog
from dr_stream.replication.holds import Holding, HoldTable, holds_beside
from dr_stream.replication.losses import LossLedger
from dr_stream.runtime.delta_reads import DeltaReads

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class FlowTables:
    index: IndexReads
    translations: TranslationLog
    losses: LossLedger
    holds: HoldTable

    @classmethod
    def of(cls, config: FlowConfig, spark: Callable[[], SparkSession] | None = None,
           log: Callable[[str], None] = print) -> FlowTables:
        tables = cls.at(config.streaming.offset_index, config.streaming.translations, spark, log,
                        config.streaming.losses)
        tables.index.life_starts = lambda: tables.losses.life_starts(config.renamer.format_remote_topic)
        tables.index.rewinds = lambda: tables.losses.rewinds(config.renamer.format_remote_topic)
        return tables

    @classmethod
    def at(cls, index_path: str, translations_path: str, spark: Callable[[], SparkSession] | None = None,
           log: Callable[[str], None] = print, losses_path: str | None = None) -> FlowTables:
        reads = DeltaReads(spark, log)
        losses = losses_path or sibling(index_path, "losses")
        return cls(IndexReads(index_path, reads), TranslationLog(translations_path, reads), LossLedger(losses, reads),
                   HoldTable(holds_beside(losses), reads))

    def holding(self) -> Holding:
        """The partitions held at a refused record now, and those skipped and waiting to go on."""
        return self.holds.holding(self.losses)

    @property
    def spark(self) -> Callable[[], SparkSession] | None:
        """What builds the Spark session these tables fall back to (None: none allowed)."""
        return self.index.reads.spark

    @property
    def fell_back(self) -> bool:
        return self.index.reads.fell_back
