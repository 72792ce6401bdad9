"""Which dr-stream releases wrote a flow's state, recorded in it and checked on every use.

A flow's state (checkpoints, offset index, translation log, ledgers, the runs topic's reports)
outlives the code that wrote it: a flow stopped on one release is started again on the next.
`STATE_FORMAT` numbers the layout this code reads and writes; a release that changes the layout
raises it and reads the older formats it names in the CHANGELOG. A start records the running
release in the state when it differs from the newest one recorded (the first start, and each
upgrade), so the state says who wrote it last; every command and start refuses a state of a newer
format than it reads, before it reads or writes any of it, rather than misreading it.

The record is a small Delta table, `<checkpoint_dir>/releases` (a row per release that started
the flow: state format, version, when), read and appended like the clusters record beside it
(`recorded_clusters`), and moved aside with it by `reset-flow`.

Invariants: a state with no record (a new flow, or one written before releases were recorded)
is of format 1; a refusal is one line naming the flow file, the key, the state's location, the
release that wrote it and what to do (`IncompatibleState`, a config error: exit 78); a record is
only ever appended to.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from dr_stream import __version__
from dr_stream.core.config_def import ConfigError
from dr_stream.runtime.delta_appends import DeltaAppends, through_spark
from dr_stream.runtime.delta_reads import DeltaReads

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from dr_stream.core.config import FlowConfig

# The layout of a flow's state this code reads and writes.
STATE_FORMAT = 1


class IncompatibleState(ConfigError):
    """The flow's state was written in a format this release does not read."""


class Release(NamedTuple):
    """One release that started the flow on its state."""

    state_format: int
    version: str
    at_ms: int


def newest_of(rows: list[dict[str, Any]]) -> Release | None:
    """The release that started the flow last (the newest row; the highest format on a tie)."""
    releases = [Release(int(r["state_format"]), str(r["version"]), int(r["written_at_ms"] or 0)) for r in rows]
    return max(releases, key=lambda r: (r.at_ms, r.state_format), default=None)


def refusal(newest: Release | None, flow_path: str, where: str, reads: int = STATE_FORMAT,
            running: str = __version__) -> str | None:
    """The line refusing a state `newest` wrote in a format newer than `reads`, or None."""
    if newest is None or newest.state_format <= reads:
        return None
    return (f"{flow_path}: streaming.checkpoint_dir: the flow's state ({where}) was written by dr-stream "
            f"{newest.version} in state format {newest.state_format}; dr-stream {running} reads format {reads} and "
            f"older: run dr-stream {newest.version} or newer on it, or move it aside (dr-stream reset-flow "
            f"--config {flow_path}) to start the flow anew")


def to_record(newest: Release | None, running: str = __version__, writes: int = STATE_FORMAT) -> bool:
    """Whether a start of `running` adds a row: no release recorded yet, or another than it."""
    return newest is None or (newest.version, newest.state_format) != (running, writes)


def schema() -> StructType:
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    return StructType([StructField("state_format", IntegerType(), False), StructField("version", StringType(), False),
                       StructField("written_at_ms", LongType(), False)])


@dataclass
class StateReleases:
    """The releases record of one flow's state: read once (`newest`), checked (`check`), appended
    to at a start (`record`)."""

    path: str
    flow_path: str
    reads: DeltaReads
    spark: Callable[[], SparkSession] | None = None
    _newest: Release | None = field(default=None, repr=False)
    _read: bool = field(default=False, repr=False)

    @classmethod
    def of(cls, config: FlowConfig, reads: DeltaReads, spark: Callable[[], SparkSession] | None = None
           ) -> StateReleases:
        return cls(config.releases_record, config.path, reads, spark)

    def newest(self) -> Release | None:
        if not self._read:
            self._newest = newest_of(self.reads.query(self.path, "SELECT state_format, version, written_at_ms FROM t"))
            self._read = True
        return self._newest

    def check(self) -> None:
        """Raises IncompatibleState when the state is of a format this release does not read."""
        line = refusal(self.newest(), self.flow_path, self.path)
        if line:
            raise IncompatibleState(line)

    def record(self, appends: DeltaAppends | None = None) -> Release | None:
        """Checks the state, then records the running release if it is not the newest recorded;
        the release recorded now (None: it was already)."""
        self.check()
        earlier = self.newest()
        if not to_record(earlier):
            return None
        now = Release(STATE_FORMAT, __version__, int(time.time() * 1000))
        rows = [tuple(now)]
        (appends or DeltaAppends(self.reads.log)).append(self.path, schema(), rows,
                                                         lambda: through_spark(self.spark, self.path, schema(), rows))
        self._newest = now
        return now
