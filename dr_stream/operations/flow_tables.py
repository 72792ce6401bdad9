"""A flow's two Delta tables as the commands read them: the offset index and the translation log.

Both are read through one `DeltaReads`, so a command sees one snapshot of each table and
reports a fall back to Spark once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dr_stream.core.config import FlowConfig
from dr_stream.index import IndexReads
from dr_stream.positions import TranslationLog
from dr_stream.runtime.delta_reads import DeltaReads


@dataclass
class FlowTables:
    index: IndexReads
    translations: TranslationLog

    @classmethod
    def of(cls, config: FlowConfig, spark: Callable[[], object] | None = None,
           log: Callable[[str], None] = print) -> FlowTables:
        return cls.at(config.streaming.offset_index, config.streaming.translations, spark, log)

    @classmethod
    def at(cls, index_path: str, translations_path: str, spark: Callable[[], object] | None = None,
           log: Callable[[str], None] = print) -> FlowTables:
        reads = DeltaReads(spark, log)
        return cls(IndexReads(index_path, reads), TranslationLog(translations_path, reads))

    @property
    def fell_back(self) -> bool:
        return self.index.reads.fell_back
