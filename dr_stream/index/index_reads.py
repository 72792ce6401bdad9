"""The offset index table read by the commands (`runtime/delta_reads`: no JVM where possible)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dr_stream.index.run_store import Run, RunStore
from dr_stream.runtime.delta_reads import DeltaReads, epoch_ms

_RUN_COLUMNS = ("origin_cluster, origin_topic, origin_partition, dest_topic, dest_partition, origin_start, "
                "origin_end, dest_start, dest_end, first_timestamp, last_timestamp, copied_at")


@dataclass
class IndexReads:
    path: str
    reads: DeltaReads
    # per destination partition, where its source topic's current life starts (`RunStore.begin_life`)
    life_starts: Callable[[], dict[tuple[str, int], int]] = field(default=dict)
    # per destination partition, its source partition's rewinds (`RunStore.rewind`)
    rewinds: Callable[[], dict[tuple[str, int], list[tuple[int, int]]]] = field(default=dict)

    def store(self, origin_cluster: str | None = None) -> RunStore:
        """The table's runs of `origin_cluster` (all when None), less a recreated topic's old ones
        and the records a rewound source wrote again."""
        return RunStore(self.runs(origin_cluster), self.life_starts(), self.rewinds())

    def runs(self, origin_cluster: str | None = None) -> list[Run]:
        where = "" if origin_cluster is None else f" WHERE origin_cluster = '{origin_cluster}'"
        rows = self.reads.query(self.path, f"SELECT {_RUN_COLUMNS} FROM t{where}")
        return [Run(r["origin_cluster"], r["origin_topic"], r["origin_partition"], r["dest_topic"], r["dest_partition"],
                    r["origin_start"], r["origin_end"], r["dest_start"], r["dest_end"], epoch_ms(r["first_timestamp"]),
                    epoch_ms(r["last_timestamp"]), epoch_ms(r["copied_at"])) for r in rows]

    def newest_origin_cluster(self) -> str | None:
        rows = self.reads.query(self.path, "SELECT origin_cluster FROM t ORDER BY copied_at DESC LIMIT 1")
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
            rows = self.reads.query(self.path, "SELECT origin_cluster, max(runs_topic_offset) AS at FROM t "
                                               "GROUP BY origin_cluster")
        except Exception:  # a table written before the column existed
            return {}
        return {r["origin_cluster"]: r["at"] for r in rows if r["at"] is not None}
