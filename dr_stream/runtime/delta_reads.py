"""Reads a flow's Delta tables for the commands, without a JVM.

`failover`, `translate` and `status` must answer in seconds, most of all when the source
datacenter is gone; starting Spark to read two small tables took most of their time. The
`deltalake` package reads the same tables natively (with SQL over them). Where it cannot open
a location (a scheme or a credential it does not know), the tables are read through Spark
instead, and that fallback is reported once.

Invariants: a table that does not exist reads as empty; any other failure to read is raised;
every read of one table through one `DeltaReads` sees the same version of it (the runs and the
runs-topic position they were read up to must agree), except a read asked for the `latest`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def epoch_ms(value: dt.datetime | None) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)


@dataclass
class DeltaReads:
    """SQL over Delta tables (each registered as `t`), one snapshot per table for the whole command."""

    # Builds a Spark session for the fallback; None: the fallback is not allowed.
    spark: Callable[[], SparkSession] | None = None
    log: Callable[[str], None] = print
    fell_back: bool = field(default=False)
    _opened: dict[str, Any] = field(default_factory=dict)  # a deltalake DeltaTable, None (no table) or why not

    def query(self, path: str, sql: str, latest: bool = False) -> list[dict[str, Any]]:
        """`sql` over the table at `path`; `latest`: over its newest version, not the one this
        object read first (a running flow reads what it appended itself since)."""
        if latest:
            self._opened.pop(path, None)
        try:
            from deltalake import DeltaTable, QueryBuilder
            from deltalake.exceptions import TableNotFoundError
        except ImportError as exc:  # pragma: no cover - a dependency of the package
            return self._through_spark(path, sql, f"deltalake is not installed ({exc})")
        if path not in self._opened:
            try:
                self._opened[path] = DeltaTable(path)
            except TableNotFoundError:
                self._opened[path] = None
            except Exception as exc:  # a scheme or credentials delta-rs does not know
                self._opened[path] = exc
        table = self._opened[path]
        if table is None:
            return []
        if isinstance(table, Exception):
            return self._through_spark(path, sql, str(table).splitlines()[0])
        result = QueryBuilder().register("t", table).execute(sql).read_all()
        columns = {name: result.column(name).to_pylist() for name in result.column_names}
        return [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]

    def _through_spark(self, path: str, sql: str, why: str) -> list[dict[str, Any]]:
        if self.spark is None:
            raise RuntimeError(f"{path}: cannot read without Spark: {why}")
        if not self.fell_back:
            self.log(f"reading {path} through Spark: the deltalake package cannot open it ({why})")
            self.fell_back = True
        from delta.tables import DeltaTable

        spark = self.spark()
        if not DeltaTable.isDeltaTable(spark, path):
            return []
        spark.read.format("delta").load(path).createOrReplaceTempView("t")
        return [row.asDict() for row in spark.sql(sql.replace('"', "`")).collect()]
