"""`dr-stream adopt`: a flow takes over the copies and groups another replicator left (`adoption`
holds the rules).

Once, before the flow's first `run`, with the other replicator stopped: each partition of the
flow's topics is walked in the driver's JVM against its copy under the flow's destination name,
the paired copies are appended to the offset index, and `<checkpoint_dir>/adopted.json` records
where copying resumes (the first `run` starts its new checkpoint there instead of reading the
source from its start). Then the destination groups with positions on the adopted topics that
the flow's `offsets.groups` selects are translated exactly and synced (`failover`'s rules: only
groups with no members, never moved back), so the other replicator's approximate positions are
replaced by exact ones; from then on the flow keeps them so. `--dry-run` walks and says, and
writes nothing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from dr_stream import __version__
from dr_stream.core.config import FlowConfig
from dr_stream.index import Run
from dr_stream.kafka.admin import partition_counts
from dr_stream.kafka.cluster_context import FlowClusters
from dr_stream.kafka.group_offsets.consumer_groups import list_groups
from dr_stream.kafka.spark_options import java_client
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.replication.adoption import (
    LOOK_AHEAD,
    LOOK_BEHIND,
    REPLICATORS,
    PartitionWalk,
    adopted_record,
    walk_line,
)
from dr_stream.replication.checkpoint_positions import next_to_read
from dr_stream.runtime.jvm_classes import java_map, jvm_class, jvm_view
from dr_stream.runtime.recorded_clusters import RecordedClusters
from dr_stream.runtime.state_paths import read_text, write_text


class AdoptRefused(RuntimeError):
    """The flow cannot adopt now; the message says why in one line."""


@dataclass
class Adoption:
    walks: list[PartitionWalk] = field(default_factory=list)
    groups_taken: list[str] = field(default_factory=list)
    groups_left: dict[str, str] = field(default_factory=dict)  # group -> why not taken over
    missing: list[str] = field(default_factory=list)  # source topics with no copy on the destination
    # source partitions whose copy has no partition of that number: topic -> the first such partition
    beyond: dict[str, int] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        return all(w.exact for w in self.walks)

    def as_dict(self) -> dict[str, object]:
        return {
            "partitions": [{"topic": w.source_topic, "destination_topic": w.dest_topic, "partition": w.partition,
                            "origin_range": w.origin_range, "resume_at": w.resume_at, "matched": w.kept,
                            "duplicates": w.duplicates, "unmatched": w.unmatched, "uncopied": w.uncopied}
                           for w in self.walks],
            "groups_taken_over": self.groups_taken, "groups_left": self.groups_left, "not_copied": self.missing,
            "partitions_not_copied": [{"topic": t, "from_partition": first} for t, first in self.beyond.items()],
        }


def adopt(config: FlowConfig, spark: SparkSession, replicator: str, dry_run: bool = False,
          say: Callable[[str], None] = print) -> Adoption:
    who = REPLICATORS[replicator]
    if not config.topics.preserve_partitions:
        raise AdoptRefused(f"{config.path}: topics.preserve_partitions is false, and {who.name}'s copies keep "
                           "their partition: adopt pairs a partition with the one of the same number")
    if next_to_read(spark, config.replicate_checkpoint):
        raise AdoptRefused(f"{config.path}: the flow has already run (its checkpoint {config.replicate_checkpoint} "
                           "holds a batch): adopt comes once, before a flow's first run")
    if read_text(spark, config.adopted_record) is not None:
        raise AdoptRefused(f"{config.path}: this flow already adopted ({config.adopted_record}); "
                           "`dr-stream reset-flow` moves its state aside to adopt again")
    tables = FlowTables.of(config, lambda: spark, say)
    if tables.index.runs():
        raise AdoptRefused(f"{config.path}: the flow's offset index {config.streaming.offset_index} already holds "
                           "runs: adopt comes once, before a flow's first run")
    out = Adoption()
    with FlowClusters.of(config, lambda: spark) as clusters:
        source_id, destination_id = clusters.distinct_ids()
        sources = {t: n for t, n in partition_counts(clusters.source.admin).items() if config.topic_filter.matches(t)}
        there = partition_counts(clusters.destination.admin)
        remote = config.renamer.format_remote_topic
        tasks = []
        for topic, n in sorted(sources.items()):
            if remote(topic) not in there:
                out.missing.append(topic)
                say(f"{topic}: no {remote(topic)} on {config.destination.alias}: the flow copies it from the start")
                continue
            copied = there[remote(topic)]
            tasks += [(topic, p) for p in range(min(n, copied))]
            if n > copied:
                out.beyond[topic] = copied
                say(f"{topic}: partitions {copied}-{n - 1} have none of their number in "
                    f"{remote(topic)} on {config.destination.alias} ({copied} partitions): the flow "
                    "adds them there and copies them as partitions it never read "
                    f"(streaming.starting_offsets: {config.streaming.starting_offsets})")
        say(f"adopting {len(tasks)} partitions {who.name} copied from {config.source.alias} to "
            f"{config.destination.alias} ({'dry run: nothing written' if dry_run else 'indexing them'})")
        out.walks = _walks(config, spark, tasks, who.added_headers, say)
        grew = [w for w in out.walks if w.grew]
        if grew:
            raise AdoptRefused(f"{', '.join(f'{w.dest_topic}[{w.partition}]' for w in grew[:5])} grew while "
                               f"adopt read {'it' if len(grew) == 1 else 'them'}: stop {who.name} first; nothing "
                               "was written")
        if not dry_run:
            # The state now holds these clusters' records, as a flow's start would make it.
            record = RecordedClusters.of(config, lambda: spark, say)
            record.record({"source": (config.source.alias, source_id),
                           "destination": (config.destination.alias, destination_id)})
            if record.releases is not None:
                record.releases.record()
            runs: list[tuple[Run, int | None]] = [(run, None) for w in out.walks for run in w.index_runs(source_id)]
            if runs:
                from dr_stream.index import OffsetIndex

                OffsetIndex(spark, config.streaming.offset_index).append_runs(runs)
            write_text(spark, config.adopted_record,
                       adopted_record(replicator, out.walks, __version__, int(time.time() * 1000)))
            say(f"indexed {len(runs)} runs ({sum(w.kept for w in out.walks)} copies) in "
                f"{config.streaming.offset_index}; where copying resumes is in {config.adopted_record}")
        _take_over_groups(config, clusters, {(w.dest_topic, w.partition) for w in out.walks if w.runs}, out,
                          dry_run, say, tables)
    return out


def _walks(config: FlowConfig, spark: SparkSession, tasks: list[tuple[str, int]], ignored: tuple[str, ...],
           say: Callable[[str], None]) -> list[PartitionWalk]:
    """Each partition walked in the driver's JVM, two at a time, each said as it ends."""
    context = spark.sparkContext
    walker = jvm_class(context, "io.drstream.kafka.AdoptedCopies")
    source = java_map(java_client(config.source), context)
    destination = java_map(java_client(config.destination), context)
    headers = jvm_view(context).java.util.ArrayList()
    for h in ignored:
        headers.add(h)
    remote = config.renamer.format_remote_topic
    done = 0

    def walk(task: tuple[str, int]) -> PartitionWalk:
        nonlocal done
        topic, partition = task
        text = walker.walk(source, destination, topic, remote(topic), partition, headers, LOOK_BEHIND, LOOK_AHEAD)
        found = PartitionWalk.of(topic, remote(topic), partition, str(text))
        done += 1
        say(f"[{done}/{len(tasks)}] {walk_line(found)}")
        return found

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="adopt") as pool:
        return list(pool.map(walk, tasks))


def _take_over_groups(config: FlowConfig, clusters: FlowClusters, adopted: set[tuple[str, int]], out: Adoption,
                      dry_run: bool, say: Callable[[str], None], tables: FlowTables) -> None:
    """The destination groups with positions on adopted partitions (those the other replicator
    synced, and consumers already there): the ones the flow selects are synced exactly now."""
    if not adopted:
        return
    offsets = clusters.destination.group_offsets
    groups = list_groups(clusters.destination.admin)
    offsets.expect(len(groups))
    committed = offsets.committed(groups, sorted(adopted))
    on_adopted = sorted(g for g, got in committed.items()
                        if not isinstance(got, Exception) and any(k in adopted for k in got))
    for group in on_adopted:
        if not config.group_filter.matches(group):
            out.groups_left[group] = "offsets.groups leaves it out: the flow does not sync it"
        elif not config.offsets.sync_to_destination:
            out.groups_left[group] = "offsets.sync_to_destination is false: `failover` moves it when asked"
        else:
            out.groups_taken.append(group)
    for group, why in out.groups_left.items():
        say(f"group {group}: not taken over ({why})")
    if not out.groups_taken:
        return
    if dry_run:
        say(f"groups taken over once indexed: {', '.join(out.groups_taken)}")
        return
    from dr_stream.operations.failover import failover

    pattern = "|".join(re.escape(g) for g in out.groups_taken)
    # tables read again: the index now holds the adopted runs
    moved = failover(config, FlowTables.of(config, tables.spark, say), pattern, log=lambda line: None,
                     clusters=clusters)
    by_group: dict[str, list[str]] = {}
    for row in moved.rows:
        by_group.setdefault(row.translation.group, []).append(row.action.text)
    for group in out.groups_taken:
        actions = by_group.get(group, [])
        say(f"group {group}: taken over, its positions translated exactly and synced "
            f"({', '.join(sorted(set(actions))) or 'no position on the source yet'}); the flow keeps it so")
