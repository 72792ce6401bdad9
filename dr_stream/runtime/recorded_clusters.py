"""The two clusters a flow's state belongs to, recorded in the state and checked on every use.

A flow's state (checkpoints, offset index, translation log) holds one source cluster's offsets
and one destination cluster's. A flow file edited to point at another cluster, or a state URI
copied into another flow's file, would have `failover` translate with one cluster's offsets and
commit them on another, and `run` copy into a cluster whose offsets the index does not describe.
Cluster ids are what tells two clusters apart (addresses move, aliases are the file's own), so
the flow records both ids in its state at its first start, and every command, and every start,
compares each cluster it reaches with the record before reading from or writing to it.

The record is a small Delta table, `<checkpoint_dir>/clusters` (one row per role, the first row
written for a role is the record), read and appended like the flow's other tables: without a JVM
where `deltalake` opens the location, through Spark where it does not (`hdfs://`). It lives
under `checkpoint_dir` so that `reset-flow`, which moves the checkpoints aside, takes it along:
after a cluster is rebuilt (a new cluster.id), that is the way to start the state anew.

Invariants: a cluster whose id differs from the recorded one is refused with one line naming
the flow file, the key and both ids (`WrongCluster`, a config error: exit 78); a state without a
record (a new flow, or one written before records were kept) takes the ids of the flow's next
start; a record is never overwritten.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dr_stream.core.config_def import ConfigError
from dr_stream.runtime.delta_appends import DeltaAppends, through_spark
from dr_stream.runtime.delta_reads import DeltaReads
from dr_stream.runtime.state_releases import StateReleases

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from dr_stream.core.config import FlowConfig

ROLES = ("source", "destination")


class WrongCluster(ConfigError):
    """A cluster answered with another cluster.id than the one the flow's state recorded."""


def wrong_cluster(flow_path: str, role: str, alias: str, found: str, recorded: str, where: str) -> str | None:
    """The line refusing `alias` (the flow's `role`) that answered as `found`, or None when that
    is the `recorded` id."""
    if found == recorded:
        return None
    return (f"{flow_path}: {role}.bootstrap_servers: {alias} answers as cluster.id {found}, but the flow's state "
            f"({where}) belongs to cluster.id {recorded}; point {role}.bootstrap_servers at that cluster, or, if it "
            f"was rebuilt, move the state aside first (dr-stream reset-flow --config {flow_path})")


def first_per_role(rows: list[dict[str, Any]]) -> dict[str, str]:
    """The record: per role, the id of the row written first (a later row for the same role, from
    two starts racing, never replaces it)."""
    ordered = sorted(rows, key=lambda r: (int(r["recorded_at_ms"] or 0), str(r["cluster_id"])))
    found: dict[str, str] = {}
    for row in ordered:
        found.setdefault(str(row["role"]), str(row["cluster_id"]))
    return found


def schema() -> StructType:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return StructType([StructField("role", StringType(), False), StructField("cluster_id", StringType(), False),
                       StructField("alias", StringType(), False), StructField("recorded_at_ms", LongType(), False)])


@dataclass
class RecordedClusters:
    """The record of one flow's state: read once (`ids`), checked per cluster (`check`), written
    for the roles it lacks (`record`)."""

    path: str
    flow_path: str
    reads: DeltaReads
    spark: Callable[[], SparkSession] | None = None
    # the releases that wrote the state: a state this release cannot read is refused before any
    # cluster is compared with the record
    releases: StateReleases | None = None
    _ids: dict[str, str] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, config: FlowConfig, spark: Callable[[], SparkSession] | None = None,
           log: Callable[[str], None] = print) -> RecordedClusters:
        """The record of `config`'s state; read through `spark` where `deltalake` cannot (a
        command's own session, built only then, when None)."""
        spark = spark or (lambda: _command_spark(config))
        reads = DeltaReads(spark, log)
        return cls(config.clusters_record, config.path, reads, spark, StateReleases.of(config, reads, spark))

    def ids(self) -> dict[str, str]:
        if self._ids is None:
            self._ids = first_per_role(self.reads.query(
                self.path, "SELECT role, cluster_id, recorded_at_ms FROM t"))
        return self._ids

    def check(self, role: str, alias: str, found: str) -> None:
        """Raises WrongCluster when `found` is not the id recorded for `role`; nothing recorded
        passes."""
        if self.releases is not None:
            self.releases.check()
        recorded = self.ids().get(role)
        if recorded is None:
            return
        line = wrong_cluster(self.flow_path, role, alias, found, recorded, self.path)
        if line:
            raise WrongCluster(line)

    def record(self, found: Mapping[str, tuple[str, str]], appends: DeltaAppends | None = None) -> list[str]:
        """Checks each role's (alias, cluster.id) and records the roles without a record; the roles
        recorded now."""
        for role, (alias, cluster_id) in found.items():
            self.check(role, alias, cluster_id)
        now = int(time.time() * 1000)
        rows = [(role, cluster_id, alias, now) for role, (alias, cluster_id) in sorted(found.items())
                if role not in self.ids()]
        if not rows:
            return []
        (appends or DeltaAppends(self.reads.log)).append(self.path, schema(), rows,
                                                         lambda: through_spark(self.spark, self.path, schema(), rows))
        self._ids = {**self.ids(), **{role: cluster_id for role, cluster_id, _, _ in rows}}
        return [role for role, *_ in rows]


def _command_spark(config: FlowConfig) -> SparkSession:
    from dr_stream.runtime.session import command_spark

    return command_spark(config)
