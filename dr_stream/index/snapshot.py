"""The offset index as it stands now, for a command run beside (or after) the flow.

Three layers, oldest first: the Delta table; the runs the flow published after its last table
write (read from the runs topic from where the table's rows stop); and copies at the end of
destination partitions that no published run covers (the flow was killed between a write and
its publication). The result is a `RunStore` that knows every copy on the destination for the
partitions asked about.

Invariant: each layer that cannot be read is reported and the snapshot is built from the
others; nothing is silently left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from dr_stream.core.config import FlowConfig
from dr_stream.core.contracts import runs_topic
from dr_stream.index.destination_tail import read_tail
from dr_stream.index.index_reads import Asked, IndexReads
from dr_stream.index.run_store import RunStore
from dr_stream.index.runs_topic import RunsReader
from dr_stream.kafka.admin import log_bounds, partition_counts
from dr_stream.kafka.cluster_context import ClusterContext

# A failover reads at most this many records past the last known run of a partition.
TAIL_LIMIT = 200_000


def index_snapshot(config: FlowConfig, index: IndexReads, origin_cluster: str | None,
                   partitions: Iterable[tuple[str, int]], destination: ClusterContext,
                   log: Callable[[str], None] = print, asked: Asked | None = None,
                   highest: Asked | None = None) -> RunStore:
    """The runs of `origin_cluster`'s copies, complete up to the log end of each destination
    partition in `partitions` (destination topic, partition). With `origin_cluster` None, the
    runs of whatever cluster the flow's runs topic names (it is the flow's own), and no tail.
    Read through `destination`'s admin client and its one reader, lent.
    `asked`: of the table, only the runs lookups of these origin offsets need (`needed_runs_sql`).
    `highest`: per origin partition, the highest offset a lookup asks; a partition whose known
    runs reach it has its tail left unread (`tail_needed`)."""
    store = index.store(origin_cluster, asked)
    admin = destination.admin
    topic = runs_topic(config.name)
    if topic in partition_counts(admin, timeout=10):
        position = index.runs_topic_position()
        runs = RunsReader(destination, topic, None if position is None else position + 1, shared=True)
        try:
            start = runs.deleted_past_start()
            if start is not None:
                # The flow trims the topic through what its table held minutes ago: a table read
                # older than that is read again rather than miss the runs between.
                store, position = index.store(origin_cluster, asked), index.runs_topic_position()
                runs.position = None if position is None else position + 1
                start = runs.deleted_past_start()
            if start is not None:
                log(f"{topic} on {config.destination.alias} starts at offset {start}, past the offset index "
                    f"table's {position}: runs published between are known only from the destination's tail")
            got = runs.read_to_end(timeout=15)
            store.extend(run for _, run in got.runs if origin_cluster in (None, run.origin_cluster))
        finally:
            runs.close()
        log(f"offset index: {len(store)} runs{'' if asked is None else ' the positions need'} "
            f"({len(got.runs)} published since the table's last write)")
    else:
        log(f"{topic} does not exist on {config.destination.alias}: the offset index table alone is used")
    if origin_cluster is not None:
        wanted = sorted(set(partitions) if highest is None else tail_needed(config, store, set(partitions), highest))
        _add_tail(config, destination, store, origin_cluster, wanted, log)
    return store


def tail_needed(config: FlowConfig, store: RunStore, partitions: set[tuple[str, int]], highest: Asked
                ) -> set[tuple[str, int]]:
    """The destination partitions whose tail a lookup may need: those a lookup asks past the last
    copy the runs know of. A partition's copies land in their origin order, and the start-up scan
    gives a run to every copy a killed flow left unreported, so a copy no run covers is past the
    partition's last run: an offset at or below the last known copy is placed by the runs alone."""
    copied = store.last_copied()
    needed = {(config.renamer.format_remote_topic(topic), partition) for (topic, partition), offset in highest.items()
              if offset > copied.get((topic, partition), -1)}
    return partitions & needed


def _add_tail(config: FlowConfig, destination: ClusterContext, store: RunStore, origin_cluster: str,
              partitions: list[tuple[str, int]], log: Callable[[str], None]) -> None:
    indexed = {(r.dest_topic, r.dest_partition) for r in store}
    gaps = {}
    bounds = log_bounds(destination.admin, [p for p in partitions if p in indexed])
    for dest, (first, end) in store.uncovered(bounds).items():
        if end - first > TAIL_LIMIT:
            log(f"{dest[0]}[{dest[1]}]: {end - first} records after the last indexed copy; not read (more than "
                f"{TAIL_LIMIT}), so a translation there may be early until the flow runs again")
        else:
            gaps[dest] = (first, end)
    if gaps:
        found = read_tail(destination, gaps, config.provenance.header, origin_cluster, config.renamer,
                          reader=destination.reader())
        store.extend(found)
        if found:
            log(f"offset index: {sum(r.records for r in found)} copies at the end of the destination had no "
                "published run yet; taken from the destination")
