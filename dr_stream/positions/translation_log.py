"""Where each group's translation stands: a Delta table at `streaming.translations`.

`status`, `drill` and the notebooks read it, a flow's start takes back from it what was left
pending, and `failover` takes from it each group's last known source position when the source
cluster is gone. A row is appended when a translation or its action changes, not on every pass.

What is live is the newest row per (group, topic, partition), unless that row says the position
is `gone` from the source (`gone_positions`): every reader wants that and nothing older. So the
log is kept as that snapshot plus a short tail of rows appended since: `compact` rewrites it to
the newest row per live position (and, per source partition that still has one, the newest row
that recorded the source's log end, which failover's RPO reads), through
`runtime.delta_upkeep`, which also removes replaced files and old log entries. An estate of
1,000 groups on 10 partitions committing every 5 s appends 2,000 rows a second; compacted every
minute, its log holds 10,000 rows and at most a minute of tail, however long the flow has run.

Invariant: compaction keeps every row a reader's query returns (`latest`, `last_source_ends`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dr_stream.positions.consumer_timestamps import GroupCommit
from dr_stream.positions.gone_positions import GONE
from dr_stream.positions.sync_outcome import Synced
from dr_stream.positions.translation_rule import Translation
from dr_stream.runtime.delta_appends import DeltaAppends
from dr_stream.runtime.delta_reads import DeltaReads
from dr_stream.runtime.delta_upkeep import RETENTION_S, Rewritten, rewriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType


# The table's columns, in order. A function: pyspark is imported only by what writes (the
# commands read the table without it).
def schema() -> StructType:
    from pyspark.sql.types import (
        BooleanType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    return StructType([
        StructField("group", StringType(), False),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("source_offset", LongType(), False),
        StructField("source_timestamp", LongType(), True),
        StructField("dest_topic", StringType(), False),
        StructField("dest_partition", IntegerType(), False),
        StructField("offset", LongType(), True),
        StructField("method", StringType(), False),
        StructField("note", StringType(), True),
        StructField("clamped", BooleanType(), False),
        StructField("log_start", LongType(), True),
        StructField("log_end", LongType(), True),
        StructField("last_copied", LongType(), True),
        StructField("source_log_end", LongType(), True),
        StructField("action", StringType(), True),
        StructField("translated_at", TimestampType(), False),
    ])


# A position's newest row first; a `gone` row written in the same millisecond as the row before
# it is the newer one (it is only ever written after that row).
_NEWEST = f"translated_at DESC, CASE WHEN method = '{GONE}' THEN 1 ELSE 0 END DESC"
_LATEST = ('SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY "group", topic, "partition" '
           f'ORDER BY {_NEWEST}) AS _n FROM t) WHERE _n = 1 AND method <> \'{GONE}\' '
           'ORDER BY "group", topic, "partition"')
_SOURCE_ENDS = ('SELECT topic, "partition", source_log_end FROM (SELECT topic, "partition", source_log_end, '
                'row_number() OVER (PARTITION BY topic, "partition" ORDER BY translated_at DESC) AS _n FROM t '
                'WHERE source_log_end IS NOT NULL) WHERE _n = 1')


# What compaction keeps: each live position's newest row, and each source partition's newest row
# with the source's log end (a newer row of the same position may not have recorded it) while a
# live position is on that partition. A position whose newest row is `gone` leaves with its rows,
# unless an older one of them is its partition's log-end row: then the `gone` row stays too, or
# that older row would read as the position's newest.
_NUMBERED = (f'SELECT *, row_number() OVER (PARTITION BY "group", topic, "partition" ORDER BY {_NEWEST}) '
             'AS _n, row_number() OVER (PARTITION BY topic, "partition", source_log_end IS NULL '
             'ORDER BY translated_at DESC) AS _e FROM t')
_MARKED = (f'SELECT *, max(CASE WHEN _n = 1 AND method <> \'{GONE}\' THEN 1 ELSE 0 END) '
           'OVER (PARTITION BY topic, "partition") AS _live, '
           'max(CASE WHEN _e = 1 AND source_log_end IS NOT NULL THEN 1 ELSE 0 END) '
           f'OVER (PARTITION BY "group", topic, "partition") AS _ends FROM ({_NUMBERED}) AS numbered')
_LIVE = (f'SELECT * FROM ({_MARKED}) AS marked WHERE (_e = 1 AND source_log_end IS NOT NULL AND _live = 1) '
         f'OR (_n = 1 AND (method <> \'{GONE}\' OR (_ends = 1 AND _live = 1)))')


class TranslationLog:
    """Appended to by a flow through `DeltaAppends` (delta-rs from the driver, Spark where it
    cannot write); read by the commands and the flow through `DeltaReads` (without a JVM where the
    `deltalake` package can open the location)."""

    def __init__(self, path: str, reads: DeltaReads | None = None, spark: SparkSession | None = None,
                 appends: DeltaAppends | None = None, retention_s: float = RETENTION_S) -> None:
        self.path = path
        self.reads = reads or DeltaReads(None if spark is None else lambda: spark)
        self.spark = spark
        self.appends = appends or DeltaAppends()
        # replaced files and log entries kept this long (`streaming.old_versions_retention`)
        self._rewrite = rewriter(None if spark is None else lambda: spark, retention_s)

    def append(self, rows: list[tuple[Translation, Synced]]) -> None:
        """Each translation a row, its sync's result as its text."""
        if not rows:
            return
        # Attributes read directly: `asdict` deep-copies every row, and a round can hold 50,000.
        names = schema().fieldNames()
        records = [tuple(action.text if f == "action" else getattr(t, f) for f in names) for t, action in rows]
        self.appends.append(self.path, schema(), records, lambda: self._append_through_spark(records))

    def _append_through_spark(self, records: list[tuple[Any, ...]]) -> None:
        if self.spark is None:
            raise RuntimeError(f"{self.path}: the translation log is appended to through Spark here; no session given")
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StructField, StructType

        from dr_stream.runtime.local_frame import local_frame

        # translated_at travels as epoch ms (JSON has no timestamps) and becomes one here.
        plain = StructType([StructField(f.name, LongType()) if f.name == "translated_at" else f for f in schema()])
        frame = local_frame(self.spark, records, plain)
        frame = frame.withColumn("translated_at", F.timestamp_millis("translated_at"))
        frame.write.format("delta").mode("append").save(self.path)

    def compact(self) -> Rewritten | None:
        """Rewrites the log to what is live (this module's docstring); rows appended meanwhile
        are kept. None when there is no log yet."""
        return self._rewrite(self.path, _LIVE, schema().fieldNames())

    def latest(self) -> list[dict[str, Any]]:
        """The newest row per (group, topic, partition)."""
        return self.reads.query(self.path, _LATEST)

    def last_commits(self) -> list[GroupCommit]:
        return [GroupCommit(r["group"], r["topic"], r["partition"], r["source_offset"], r["source_timestamp"])
                for r in self.latest()]

    def last_source_ends(self) -> dict[tuple[str, int], int]:
        """The newest source log end recorded per source partition."""
        return {(r["topic"], r["partition"]): r["source_log_end"] for r in self.reads.query(self.path, _SOURCE_ENDS)}
