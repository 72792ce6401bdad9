"""Taking over what another replicator copied: the rules of `dr-stream adopt`, without I/O.

A team moving to dr-stream already has its topics copied by MirrorMaker 2 or Confluent
Replicator. Copying them again would double the destination and move every consumer; instead
`adopt` pairs each copy with its source record (`jvm/ io.drstream.kafka.CopyMatcher`, which reads
both partitions in the driver's JVM), writes the pairs into the flow's offset index as runs, and
records per partition the origin offset copying resumes at.

What follows from those runs is the flow's usual rule, unchanged: the resume marks of `run` are the
highest origin offset the index holds per partition, so nothing adopted is copied again, and a
group translates through the adopted runs exactly as through the flow's own. A copy the walk
could not pair (its source record is gone, or it was never a copy) is said and counted, and a
group placed there falls back to its record's timestamp. The copy kept for a record written twice
(an at-least-once re-send) is the later one: a consumer placed on it reads every later record once.

Invariant: an adopted partition's runs are one to one, in ascending origin and destination order,
and end at its resume offset minus one; a partition with no copy paired adopts nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dr_stream.index import Run
from dr_stream.replication.checkpoint_positions import EARLIEST, LATEST, specific_offsets

Partition = tuple[str, int]

# Records the walk looks back for a re-send (a replicator resends from its last committed position:
# MirrorMaker 2 commits every offset.flush.interval.ms, 60 s by default) and ahead for records it
# never copied. Each source record kept costs ~100 bytes of the driver's heap.
LOOK_BEHIND = 500_000
LOOK_AHEAD = 100_000


@dataclass(frozen=True)
class Replicator:
    """The replicator adopted from: its name as said, and the headers it adds to its copies
    (left out when a copy is compared with its source record)."""

    name: str
    added_headers: tuple[str, ...] = ()


REPLICATORS: dict[str, Replicator] = {
    "mirrormaker2": Replicator("MirrorMaker 2"),
    # Replicator stamps `__replicator_id` when provenance.header.enable is set.
    "replicator": Replicator("Confluent Replicator", ("__replicator_id",)),
}


@dataclass(frozen=True)
class PartitionWalk:
    """One destination partition as the walk found it (the JSON `AdoptedCopies.walk` returns)."""

    source_topic: str
    dest_topic: str
    partition: int
    dest_start: int
    dest_end: int
    records: int  # destination records read
    kept: int  # copies paired with their source record and indexed
    duplicates: int  # copies written again later: the later copy is the one indexed
    unmatched: int  # destination records no source record still there was found for
    uncopied: int  # source records between the first and last paired copy the replicator skipped
    runs: tuple[tuple[int, int, int, int, int, int], ...]  # origin start/end, dest start/end, first/last ms
    unmatched_ranges: tuple[tuple[int, int], ...]
    uncopied_ranges: tuple[tuple[int, int, int], ...]
    unread: bool  # a partition stopped answering before its end
    grew: bool  # the destination grew while read: the other replicator still writes

    @classmethod
    def of(cls, source_topic: str, dest_topic: str, partition: int, text: str) -> PartitionWalk:
        doc: dict[str, Any] = json.loads(text)
        return cls(source_topic, dest_topic, partition, doc["dest_start"], doc["dest_end"], doc["records"],
                   doc["kept"], doc["duplicates"], doc["unmatched"], doc["uncopied"],
                   tuple(tuple(r) for r in doc["runs"]),
                   tuple(tuple(r) for r in doc["unmatched_ranges"]),
                   tuple(tuple(r) for r in doc["uncopied_ranges"]),
                   bool(doc["unread"]), bool(doc["grew"]))

    @property
    def resume_at(self) -> int | None:
        """The origin offset copying resumes at: just past the last paired copy."""
        return self.runs[-1][1] + 1 if self.runs else None

    @property
    def origin_range(self) -> tuple[int, int] | None:
        return (self.runs[0][0], self.runs[-1][1]) if self.runs else None

    @property
    def exact(self) -> bool:
        return not (self.unmatched or self.uncopied or self.unread)

    def index_runs(self, origin_cluster: str) -> list[Run]:
        """The paired copies as the offset index holds them."""
        return [Run(origin_cluster, self.source_topic, self.partition, self.dest_topic, self.partition, os, oe, ds, de,
                    first if first >= 0 else None, last if last >= 0 else None)
                for os, oe, ds, de, first, last in self.runs]


def walk_line(walk: PartitionWalk) -> str:
    """One partition's result, as `adopt` prints it."""
    where = f"{walk.source_topic}[{walk.partition}] -> {walk.dest_topic}[{walk.partition}]"
    if walk.records == 0:
        return f"{where}: the destination holds no record: copied from the start"
    origin = walk.origin_range
    adopted = (f"origin offsets {origin[0]}..{origin[1]} at destination offsets {walk.runs[0][2]}..{walk.runs[-1][3]}"
               if origin else "nothing paired")
    parts = [f"{walk.kept} matched"]
    if walk.duplicates:
        parts.append(f"{walk.duplicates} written twice (the later copy indexed)")
    if walk.unmatched:
        shown = ", ".join(f"{a}..{b}" for a, b in walk.unmatched_ranges[:5])
        parts.append(f"{walk.unmatched} unmatched at destination offsets {shown}"
                     f"{' ...' if len(walk.unmatched_ranges) > 5 else ''} (groups there fall back to timestamps)")
    if walk.uncopied:
        shown = ", ".join(f"{a}..{b}" for a, b, _ in walk.uncopied_ranges[:5])
        parts.append(f"{walk.uncopied} source records it never copied (origin offsets {shown}), not copied now")
    if walk.unread:
        parts.append("read stopped short: the rest is copied by the flow")
    resume = f"; copying resumes at origin offset {walk.resume_at}" if walk.resume_at is not None else ""
    return f"{where}: {adopted}: {', '.join(parts)}{resume}"


def adopted_record(replicator: str, walks: list[PartitionWalk], release: str, at_ms: int) -> str:
    """What `<checkpoint_dir>/adopted.json` holds: where copying resumes, per partition."""
    resume: dict[str, dict[str, int]] = {}
    for w in walks:
        if w.resume_at is not None:
            resume.setdefault(w.source_topic, {})[str(w.partition)] = w.resume_at
    return json.dumps({"from": replicator, "release": release, "at_ms": at_ms, "resume": resume}, sort_keys=True)


def resume_offsets(text: str | None) -> dict[Partition, int]:
    """The record's resume offsets (empty without one)."""
    if not text:
        return {}
    doc = json.loads(text)
    return {(topic, int(p)): int(o) for topic, parts in doc.get("resume", {}).items() for p, o in parts.items()}


def adopted_start(replicated: Mapping[str, int], resume: Mapping[Partition, int], earliest: bool) -> str | None:
    """A first query's startingOffsets (Spark's specific offsets, every partition named) when an
    adoption says where copying resumes: there for adopted partitions, the flow's own start
    (`streaming.starting_offsets`) for the rest; None when no replicated partition was adopted."""
    if not any(k[0] in replicated for k in resume):
        return None
    return specific_offsets(replicated, resume, EARLIEST if earliest else LATEST)
