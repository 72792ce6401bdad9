"""The offset index table read by the commands (`runtime/delta_reads`: no JVM where possible).

A command reads the runs its lookups need, not the table whole: the table holds a run for every
stretch of copying the destination still keeps (one per transaction of a transactional source),
so a whole read grows with the flow's age, while a command asks about live positions only.
`needed_runs_sql` is that rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dr_stream.index.run_store import Run, RunStore
from dr_stream.runtime.delta_reads import DeltaReads, epoch_ms

_RUN_COLUMNS = ("origin_cluster, origin_topic, origin_partition, dest_topic, dest_partition, origin_start, "
                "origin_end, dest_start, dest_end, records, first_timestamp, last_timestamp, copied_at")
_RUN_KEY = "origin_cluster, origin_topic, origin_partition, dest_topic, dest_partition"
# Kafka's legal topic characters, and a cluster.id's (base64url): what may stand inside a literal
_NAME = re.compile(r"[A-Za-z0-9._-]+")

# (origin topic, origin partition) -> the lowest origin offset a command will look up there
Asked = Mapping[tuple[str, int], int]


def needed_runs_sql(origin_cluster: str | None, asked: Asked | None) -> str:
    """The query (over the table as `t`) for the runs that answer lookups of `asked`, of
    `origin_cluster`'s copies (any cluster's when None); `asked` None: every run.

    A lookup of origin offset C answers from the first run, in destination order, that ends at or
    past C (`RunStore.locate`), or from the partition's newest run when none does (where the copy
    stands); runs that end below the lowest C asked of their partition never answer. So the query
    keeps, per run key, the runs ending at or past that C, the newest run by destination offset
    and the one furthest in origin offsets (which `last_copied` reports when a restart copied out
    of order). A key may come twice; the store takes a run it already holds once.
    """
    if origin_cluster is not None and not _NAME.fullmatch(origin_cluster):
        raise ValueError(f"not a cluster id: {origin_cluster!r}")
    cluster = "" if origin_cluster is None else f"origin_cluster = '{origin_cluster}'"
    # A name that cannot stand in a literal is read as every run, not left out: a partition asked
    # of and given only its newest runs would be answered from the wrong run.
    if asked is None or not all(_NAME.fullmatch(topic) for topic, _ in asked):
        return f"SELECT {_RUN_COLUMNS} FROM t" + (f" WHERE {cluster}" if cluster else "")
    columns = ", ".join(f"t.{c.strip()}" for c in _RUN_COLUMNS.split(","))
    # an aggregate, not a window: one pass over the table, no sort of it
    same_key = " AND ".join(f"t.{k.strip()} = m.{k.strip()}" for k in _RUN_KEY.split(","))
    newest = (f"SELECT {columns} FROM t JOIN (SELECT {_RUN_KEY}, max(dest_end) AS newest, max(origin_end) AS "
              f"furthest FROM t{f' WHERE {cluster}' if cluster else ''} GROUP BY {_RUN_KEY}) AS m ON {same_key} "
              "AND (t.dest_end = m.newest OR t.origin_end = m.furthest)")
    wanted = [(topic, int(partition), int(offset)) for (topic, partition), offset in sorted(asked.items())]
    if not wanted:
        return newest
    values = ", ".join(f"('{topic}', {partition}, {offset})" for topic, partition, offset in wanted)
    reached = (f"SELECT {columns} FROM t JOIN (VALUES {values}) AS w(topic, part, low) "
               "ON t.origin_topic = w.topic AND t.origin_partition = w.part WHERE t.origin_end >= w.low"
               + (f" AND t.{cluster}" if cluster else ""))
    return f"{reached} UNION ALL {newest}"


def run_of(row: Any) -> Run:
    """A row of the index table (a Spark Row or a dict from `deltalake`) -> a Run."""
    get: Callable[[str], Any] = row.get if isinstance(row, dict) else row.__getitem__
    origin_start, origin_end, dest_start, dest_end = (get("origin_start"), get("origin_end"), get("dest_start"),
                                                      get("dest_end"))
    records = get("records")
    # a span's records are the copies it stands for, fewer than one of its ranges (`spans`)
    one_to_one = records is None or records == dest_end - dest_start + 1 == origin_end - origin_start + 1
    return Run(get("origin_cluster"), get("origin_topic"), get("origin_partition"), get("dest_topic"),
               get("dest_partition"), origin_start, origin_end, dest_start, dest_end,
               epoch_ms(get("first_timestamp")), epoch_ms(get("last_timestamp")), epoch_ms(get("copied_at")),
               None if one_to_one else records)


@dataclass
class IndexReads:
    path: str
    reads: DeltaReads
    # per destination partition, where its source topic's current life starts (`RunStore.begin_life`)
    life_starts: Callable[[], dict[tuple[str, int], int]] = field(default=dict)
    # per destination partition, its source partition's rewinds (`RunStore.rewind`)
    rewinds: Callable[[], dict[tuple[str, int], list[tuple[int, int]]]] = field(default=dict)

    def store(self, origin_cluster: str | None = None, asked: Asked | None = None) -> RunStore:
        """The table's runs of `origin_cluster` (all when None) that lookups of `asked` need
        (`needed_runs_sql`; every run when None), less a recreated topic's old ones and the
        records a rewound source wrote again."""
        return RunStore(self.runs(origin_cluster, asked), self.life_starts(), self.rewinds())

    def runs(self, origin_cluster: str | None = None, asked: Asked | None = None) -> list[Run]:
        rows = self.reads.query(self.path, needed_runs_sql(origin_cluster, asked))
        return [run_of(r) for r in rows]

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
