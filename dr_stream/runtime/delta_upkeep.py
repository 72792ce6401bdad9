"""Upkeep of a flow's Delta tables: rewritten to what is live, old files and log entries removed.

A flow appends to its tables every second, for months. Left alone, a Delta table keeps every
row ever appended, every Parquet file every rewrite replaced, and a log entry per commit (86,400
a day at one commit a second): what the flow keeps would grow with its age, and every read would
replay it. `rewrite` replaces a table's rows with what a query over the table keeps (the newest
row per key, say), `vacuum` deletes the files no version younger than the retention reads, and
the table properties `settle` sets make Delta's own log cleanup (at each checkpoint, every
`CHECKPOINT_INTERVAL` commits, in delta-rs and in Spark alike) drop log entries older than it.
The retention is `streaming.old_versions_retention` (an hour by default): a time for readers of
an older version to finish, so what a table keeps on disk is its live rows plus that long of
replaced files and log entries, whatever the table's age.

A rewrite reads one version of the table and commits an overwrite that removes exactly the files
of that version: rows appended meanwhile by another writer are kept (they are newer than what the
rewrite read), so the flow's appends never wait for its upkeep. Where delta-rs cannot write the
table (hdfs://), the same runs through Spark, whose commit refuses a concurrent append instead;
the rewrite is then tried again at the next upkeep.

Invariants: a rewrite never drops a row its query keeps, nor a row appended after the version it
read; nothing a reader opened less than the retention ago is deleted under it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Commits between two checkpoints of the log: a reader replays at most this many JSON entries.
CHECKPOINT_INTERVAL = 100
# How long a log entry and a replaced file are kept unless the flow says otherwise: readers of an
# older version (a command, a notebook) have finished by then; time travel further back is not a
# use of these tables.
RETENTION_S = 3600.0


def retention_interval(retention_s: float) -> str:
    """A retention as Delta's table properties write it (`interval 1 hours`: the form tables
    written before the retention was configurable carry, so their properties stay as they are)."""
    seconds = max(1, round(retention_s))
    return f"interval {seconds // 3600} hours" if seconds % 3600 == 0 else f"interval {seconds} seconds"


def properties(retention_s: float = RETENTION_S) -> dict[str, str]:
    """The table properties every flow table carries."""
    return {"delta.checkpointInterval": str(CHECKPOINT_INTERVAL),
            "delta.logRetentionDuration": retention_interval(retention_s),
            "delta.deletedFileRetentionDuration": retention_interval(retention_s),
            "delta.enableExpiredLogCleanup": "true"}


@dataclass(frozen=True)
class Rewritten:
    version: int  # the version the rewrite read
    rows_before: int
    rows_after: int
    files_deleted: int


def _delta_table(path: str) -> Any:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(path)
    except TableNotFoundError:
        return None


def settle(path: str, retention_s: float = RETENTION_S) -> None:
    """Sets the retention properties on the table (once: a table that has them is left alone)."""
    table = _delta_table(path)
    if table is None:
        return
    config = table.metadata().configuration
    wanted = properties(retention_s)
    if any(config.get(key) != value for key, value in wanted.items()):
        table.alter.set_table_properties(wanted)


def rewrite(path: str, keep_sql: str, columns: list[str], retention_s: float = RETENTION_S) -> Rewritten | None:
    """Replaces the table's rows with `keep_sql` over it (registered as `t`), its `columns` in
    order, through delta-rs; None when there is no table. Files the rewrite replaced are deleted
    once no recent reader can need them (`vacuum`)."""
    from deltalake import QueryBuilder, write_deltalake

    table = _delta_table(path)
    if table is None:
        return None
    settle(path, retention_s)
    table = _delta_table(path)
    before = _rows(table)
    kept = QueryBuilder().register("t", table).execute(
        f"SELECT {', '.join(_quoted(c) for c in columns)} FROM ({keep_sql}) AS kept").read_all()
    write_deltalake(table, kept, mode="overwrite")
    return Rewritten(table.version(), before, kept.num_rows, len(vacuum(path)))


def _quoted(column: str) -> str:
    return f'"{column}"'


def _rows(table: Any) -> int:
    """Rows of the table's version, from the log's per-file statistics (no data is read)."""
    actions = table.get_add_actions(flatten=True)
    return int(sum(v or 0 for v in actions.column("num_records").to_pylist()))


def vacuum(path: str) -> list[str]:
    """Deletes files no version of the table's retention (`settle`) reads; returns them."""
    table = _delta_table(path)
    if table is None:
        return []
    # No hours given: the table's own deletedFileRetentionDuration, which may be under an hour.
    return list(table.vacuum(retention_hours=None, dry_run=False, enforce_retention_duration=False))


def rewrite_through_spark(spark: SparkSession, path: str, keep_sql: str, columns: list[str],
                          retention_s: float = RETENTION_S) -> Rewritten | None:
    """`rewrite` for a table delta-rs cannot write: Spark reads one version and overwrites it
    (a concurrent append fails this commit, to be tried again), then Spark's VACUUM."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return None
    table = DeltaTable.forPath(spark, path)
    newest = table.history(1).first()
    if newest is None:
        return None
    version = int(newest["version"])
    current = spark.read.format("delta").option("versionAsOf", version).load(path)
    current.createOrReplaceTempView("t")
    before = current.count()
    kept = spark.sql(keep_sql.replace('"', "`")).select(*columns).localCheckpoint()
    try:
        after = kept.count()
        wanted = ", ".join(f"'{k}' = '{v}'" for k, v in properties(retention_s).items())
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({wanted})")
        kept.write.format("delta").mode("overwrite").save(path)
    finally:
        # A local checkpoint's blocks stay in the block manager until unpersisted: an upkeep
        # every minute would hold every version it ever kept (a bench's JVM died of it).
        kept.unpersist()
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    spark.sql(f"VACUUM delta.`{path}` RETAIN {retention_s / 3600:.6f} HOURS")
    return Rewritten(version, before, after, -1)


def rewriter(spark: Callable[[], SparkSession] | None, retention_s: float = RETENTION_S
             ) -> Callable[[str, str, list[str]], Rewritten | None]:
    """`rewrite` through delta-rs, and through Spark (when `spark` is given) where delta-rs
    cannot open the table's location; replaced files and log entries kept `retention_s`."""

    def run(path: str, keep_sql: str, columns: list[str]) -> Rewritten | None:
        try:
            return rewrite(path, keep_sql, columns, retention_s)
        except Exception:
            if spark is None or not path.startswith(("hdfs:", "s3a:", "abfss:", "viewfs:")):
                raise
            return rewrite_through_spark(spark(), path, keep_sql, columns, retention_s)

    return run
