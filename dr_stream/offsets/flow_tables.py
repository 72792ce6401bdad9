"""Reads a flow's Delta tables (offset index, translation log) for the commands, without a JVM.

`failover`, `translate` and `status` must answer in seconds, most of all when the source
datacenter is gone; starting Spark to read two small tables took most of their time. The
`deltalake` package reads the same tables natively (with SQL over them). Where it cannot open
a location (a scheme or a credential it does not know), the tables are read through Spark
instead, and that fallback is reported once.

Invariants: a table that does not exist reads as empty; any other failure to read is raised;
every read of one table by one `FlowTables` sees the same version of it (the runs and the
runs-topic position they were read up to must agree).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

from dr_stream.offsets.consumer_timestamps import GroupCommit
from dr_stream.offsets.run_store import Run

_RUN_COLUMNS = ("origin_cluster, origin_topic, origin_partition, dest_topic, dest_partition, origin_start, "
                "origin_end, dest_start, dest_end, first_timestamp, last_timestamp, copied_at")
_LATEST = ('SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY "group", topic, "partition" '
           'ORDER BY translated_at DESC) AS _n FROM t) WHERE _n = 1 ORDER BY "group", topic, "partition"')
_SOURCE_ENDS = ('SELECT topic, "partition", source_log_end FROM (SELECT topic, "partition", source_log_end, '
                'row_number() OVER (PARTITION BY topic, "partition" ORDER BY translated_at DESC) AS _n FROM t '
                'WHERE source_log_end IS NOT NULL) WHERE _n = 1')


def _ms(value: dt.datetime | None) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)


@dataclass
class FlowTables:
    """The offset index and translation log of one flow (`of` builds it from the flow's config)."""

    index_path: str
    translations_path: str
    # Builds a Spark session for the fallback; None: the fallback is not allowed.
    spark: Callable[[], object] | None = None
    log: Callable[[str], None] = print
    fell_back: bool = field(default=False)
    # One snapshot per table for the whole command: two queries of one table see the same version.
    _opened: dict[str, object] = field(default_factory=dict)

    @classmethod
    def of(cls, config, spark: Callable[[], object] | None = None, log: Callable[[str], None] = print) -> FlowTables:
        return cls(config.streaming.offset_index, config.streaming.translations, spark, log)

    def _query(self, path: str, sql: str) -> list[dict]:
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

    def _through_spark(self, path: str, sql: str, why: str) -> list[dict]:
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

    def runs(self, origin_cluster: str | None = None) -> list[Run]:
        where = "" if origin_cluster is None else f" WHERE origin_cluster = '{origin_cluster}'"
        rows = self._query(self.index_path, f"SELECT {_RUN_COLUMNS} FROM t{where}")
        return [Run(r["origin_cluster"], r["origin_topic"], r["origin_partition"], r["dest_topic"], r["dest_partition"],
                    r["origin_start"], r["origin_end"], r["dest_start"], r["dest_end"], _ms(r["first_timestamp"]),
                    _ms(r["last_timestamp"]), _ms(r["copied_at"])) for r in rows]

    def newest_origin_cluster(self) -> str | None:
        rows = self._query(self.index_path, "SELECT origin_cluster FROM t ORDER BY copied_at DESC LIMIT 1")
        return rows[0]["origin_cluster"] if rows else None

    def runs_and_positions(self) -> tuple[list[Run], dict[str, int]]:
        """Every run, and per origin cluster where the index's reading of the runs topic stopped,
        from one snapshot (a flow's start reads its index here while its Spark session starts)."""
        return self.runs(), self._positions()

    def runs_topic_position(self) -> int | None:
        """Where the index's reading of the runs topic stopped (None: no row came from it)."""
        return max(self._positions().values(), default=None)

    def _positions(self) -> dict[str, int]:
        """Per origin cluster, the newest runs-topic offset its rows came from."""
        try:
            rows = self._query(self.index_path, "SELECT origin_cluster, max(runs_topic_offset) AS at FROM t "
                                                "GROUP BY origin_cluster")
        except Exception:  # a table written before the column existed
            return {}
        return {r["origin_cluster"]: r["at"] for r in rows if r["at"] is not None}

    def latest_translations(self) -> list[dict]:
        """The newest translation-log row per (group, topic, partition)."""
        return self._query(self.translations_path, _LATEST)

    def last_commits(self) -> list[GroupCommit]:
        return [GroupCommit(r["group"], r["topic"], r["partition"], r["source_offset"], r["source_timestamp"])
                for r in self.latest_translations()]

    def last_source_ends(self) -> dict[tuple[str, int], int]:
        """The newest source log end recorded per source partition."""
        return {(r["topic"], r["partition"]): r["source_log_end"]
                for r in self._query(self.translations_path, _SOURCE_ENDS)}
