"""The offset index: where each copied record landed on the destination.

The one face other wings use; what is behind it may change without them knowing.
- `Run`, `RunKey`, `Located`, `RunStore`: a run of copied records and the look-up translation
  is built on (`run_store`, pure).
- `IndexFeed`: keeps a running flow's index current, from the runs the sink's producer
  publishes to the runs topic (`runs_topic`, `ensure_runs_topic`, `settle_runs_topic`; `runs_trim`
  deletes what the table holds) to the Delta table (`OffsetIndex`, `index_table`).
- `IndexReads`: the table as the commands read it, without a JVM; `index_snapshot`: the table,
  the runs published since and the destination's uncovered tail, as one `RunStore`.
- `SpanReads`: a translation round's reads of the destination inside spans (`spans`: runs below
  every active position joined; `LivePosition`: a group's position, idle once it has stood still
  `IDLE_AFTER_S`, when it pins its run instead of holding the floor down).

Names resolve at first use, so a command that reads the table does not import Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dr_stream.face import resolver

if TYPE_CHECKING:
    from dr_stream.index.index_feed import IndexFeed
    from dr_stream.index.index_reads import IndexReads
    from dr_stream.index.index_table import OffsetIndex
    from dr_stream.index.run_store import Located, Run, RunKey, RunStore
    from dr_stream.index.runs_topic import ensure_runs_topic, runs_trim, settle_runs_topic
    from dr_stream.index.snapshot import index_snapshot
    from dr_stream.index.span_reads import SpanReads
    from dr_stream.index.spans import IDLE_AFTER_S, LivePosition

# name on the face -> (module, name there)
_FACE = {
    "Run": ("run_store", "Run"),
    "RunKey": ("run_store", "RunKey"),
    "Located": ("run_store", "Located"),
    "RunStore": ("run_store", "RunStore"),
    "IndexFeed": ("index_feed", "IndexFeed"),
    "OffsetIndex": ("index_table", "OffsetIndex"),
    "IndexReads": ("index_reads", "IndexReads"),
    "index_snapshot": ("snapshot", "index_snapshot"),
    "ensure_runs_topic": ("runs_topic", "ensure_runs_topic"),
    "settle_runs_topic": ("runs_topic", "settle_runs_topic"),
    "runs_trim": ("runs_topic", "runs_trim"),
    "SpanReads": ("span_reads", "SpanReads"),
    "LivePosition": ("spans", "LivePosition"),
    "IDLE_AFTER_S": ("spans", "IDLE_AFTER_S"),
}
__all__ = [
    "IDLE_AFTER_S",
    "IndexFeed",
    "IndexReads",
    "LivePosition",
    "Located",
    "OffsetIndex",
    "Run",
    "RunKey",
    "RunStore",
    "SpanReads",
    "ensure_runs_topic",
    "index_snapshot",
    "runs_trim",
    "settle_runs_topic",
]

__getattr__ = resolver(__name__, _FACE)
