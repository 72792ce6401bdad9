"""`dr-stream translate --offsets`: positions an application keeps itself, translated.

A Spark query's checkpoint, a Flink job, a Kafka Connect sink or a custom consumer keeps its
position outside any consumer group. It hands it over in Spark's `startingOffsets` shape,
`{"topic": {"partition": offset}}`, each offset the next source record to read, and gets the
same shape back with the destination's topic names and offsets. Each position translates
exactly as a group's committed offset does (`failover.translate_source_positions`): the same
index, the same rules, the same clamps. Spark's -2 (earliest) and -1 (latest) mean the same
thing on the destination and pass through unchanged.

Invariant: the answer holds one position for every position asked, and the command says which
of them are not exact (method other than exact, next or returned, or clamped).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dr_stream.core.config import FlowConfig
from dr_stream.kafka.admin import log_bounds
from dr_stream.kafka.cluster_context import FlowClusters
from dr_stream.operations.failover import SourcePositions, translate_source_positions
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.positions import GroupCommit, RecordTimestamps, Translation, stamped
from dr_stream.replication.checkpoint_positions import EARLIEST, LATEST

SENTINELS = {EARLIEST: "earliest", LATEST: "latest"}
# the methods that resume a reader with nothing read twice and nothing skipped
EXACT_METHODS = frozenset({"exact", "next", "returned", *SENTINELS.values()})
APPLICATION = ""  # the group name the translation rule is given: these positions belong to no group


class OffsetsError(ValueError):
    """Offsets that cannot be translated as given: one line naming where and why."""


@dataclass(frozen=True)
class TranslatedOffset:
    """One position asked and its answer on the destination."""

    topic: str
    partition: int
    source_offset: int
    dest_topic: str
    offset: int | None
    method: str
    note: str
    clamped: bool = False

    @property
    def exact(self) -> bool:
        return self.method in EXACT_METHODS and not self.clamped and self.offset is not None

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "source_offset": self.source_offset,
                "dest_topic": self.dest_topic, "offset": self.offset, "method": self.method, "note": self.note,
                "exact": self.exact}

    def line(self) -> str:
        """What an operator reads of a position that is not exact."""
        where = f"{self.topic}[{self.partition}] at {self.source_offset}"
        answer = ("no destination offset" if self.offset is None
                  else f"{self.dest_topic}[{self.partition}] at {self.offset}")
        return f"not exact: {where} -> {answer} ({self.method}{': ' + self.note if self.note else ''})"


@dataclass(frozen=True)
class TranslatedOffsets:
    positions: list[TranslatedOffset]
    source_reachable: bool
    origin: str
    source_cluster: str | None = None  # the source's cluster.id, as far as known
    destination_cluster: str | None = None

    def document(self) -> dict[str, dict[str, int | None]]:
        """The answer in Spark's startingOffsets shape, under the destination's topic names."""
        out: dict[str, dict[str, int | None]] = {}
        for p in sorted(self.positions, key=lambda x: (x.dest_topic, x.partition)):
            out.setdefault(p.dest_topic, {})[str(p.partition)] = p.offset
        return out

    @property
    def inexact(self) -> list[TranslatedOffset]:
        return [p for p in self.positions if not p.exact]


def parse_offsets(text: str, where: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> source offset, from Spark's startingOffsets JSON; `where` names the
    input in the one line an error says."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OffsetsError(f"{where}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(document, dict) or not document:
        raise OffsetsError(f'{where}: expected {{"topic": {{"partition": offset}}}}, got {_shown(document)}')
    offsets: dict[tuple[str, int], int] = {}
    for topic, partitions in document.items():
        if not isinstance(partitions, dict) or not partitions:
            raise OffsetsError(f'{where}: topic {topic!r}: expected {{"partition": offset}}, got {_shown(partitions)}')
        for partition, offset in partitions.items():
            if not (isinstance(partition, str) and partition.isdigit()):
                raise OffsetsError(f"{where}: topic {topic!r}: partition {partition!r} is not a partition number")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise OffsetsError(f"{where}: {topic}[{partition}]: offset {_shown(offset)} is not an offset "
                                   "(a number >= 0, or -2 for earliest, -1 for latest)")
            offsets[(topic, int(partition))] = offset
    return offsets


def _shown(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def refused(offsets: Mapping[tuple[str, int], int], copied: Callable[[str], bool],
            bounds: Mapping[tuple[str, int], tuple[int, int]] | None, where: str) -> str | None:
    """Why the offsets cannot be translated, in one line, or None. `bounds`: the source's log
    (start, end) per partition when the source answers, else None (nothing to check against)."""
    for (topic, partition), offset in sorted(offsets.items()):
        if not copied(topic):
            return f"{where}: topic {topic!r} is not one this flow copies (its topics filter)"
        if bounds is None or offset in SENTINELS:
            continue
        if (topic, partition) not in bounds:
            return f"{where}: {topic}[{partition}] does not exist on the source"
        end = bounds[(topic, partition)][1]
        if offset > end:
            return (f"{where}: {topic}[{partition}]: offset {offset} is beyond the source's log end {end}: "
                    "these offsets are not from this flow's source")
    return None


def _answer(translation: Translation) -> TranslatedOffset:
    return TranslatedOffset(translation.topic, translation.partition, translation.source_offset,
                            translation.dest_topic, translation.offset, translation.method, translation.note,
                            translation.clamped)


def translate_offsets(config: FlowConfig, tables: FlowTables, offsets: Mapping[tuple[str, int], int],
                      where: str, log: Callable[[str], None] = print) -> TranslatedOffsets:
    """The destination's positions for `offsets` (source positions), as the flow's index has them
    now; the source is read when it answers (its ends, the records' timestamps), else what the
    flow last recorded of it stands in."""
    return translate_offset_sets(config, tables, {APPLICATION: offsets}, where, log)[APPLICATION]


def translate_offset_sets(config: FlowConfig, tables: FlowTables,
                          sets: Mapping[str, Mapping[tuple[str, int], int]], where: str,
                          log: Callable[[str], None] = print,
                          vet_source: Callable[[str | None], None] = lambda cluster_id: None,
                          clusters: FlowClusters | None = None) -> dict[str, TranslatedOffsets]:
    """Several sets of positions (a checkpoint's batches, each source of a query) translated at
    once, each under its label: one look at each cluster for all. `vet_source` hears the
    source's cluster.id (None when unknown) before anything is checked or translated, and may
    refuse by raising. `clusters`: the command's contexts, else the call's own."""
    if clusters is not None:
        return _translate_sets(config, tables, sets, where, log, vet_source, clusters)
    with FlowClusters.of(config, tables.spark) as own:
        return _translate_sets(config, tables, sets, where, log, vet_source, own)


def _translate_sets(config: FlowConfig, tables: FlowTables, sets: Mapping[str, Mapping[tuple[str, int], int]],
                    where: str, log: Callable[[str], None], vet_source: Callable[[str | None], None],
                    clusters: FlowClusters) -> dict[str, TranslatedOffsets]:
    destination_id = clusters.destination.cluster_id()  # one that is not the flow's is refused first
    source_id = clusters.source.reachable_id()
    live = source_id is not None
    known_id = source_id if live else tables.index.newest_origin_cluster()
    vet_source(known_id)
    every = {(label, tp): o for label, offsets in sets.items() for tp, o in offsets.items()}
    bounds = log_bounds(clusters.source.admin, sorted({tp for _, tp in every})) if live else None
    for label, offsets in sets.items():
        why = refused(offsets, config.topic_filter.matches, bounds, f"{where}{': ' + label if label else ''}")
        if why:
            raise OffsetsError(why)
    commits = [GroupCommit(label, topic, partition, offset)
               for (label, (topic, partition)), offset in sorted(every.items()) if offset not in SENTINELS]
    if live:
        timestamps = RecordTimestamps(clusters.source, shared=True)
        try:
            commits = stamped(commits, timestamps)
        finally:
            timestamps.close()
        positions = SourcePositions(commits, source_id, f"{where}, against {config.source.alias} (live)", True, {})
    else:
        positions = SourcePositions(commits, known_id,
                                    f"{where}; {config.source.alias} is unreachable: its log ends as the flow "
                                    "last recorded them", False, tables.translations.last_source_ends())
    translated = translate_source_positions(config, tables, clusters, positions, log)
    out = {}
    for label, offsets in sets.items():
        answers = [_answer(t) for t in translated if t.group == label]
        answers += [TranslatedOffset(topic, partition, offset, config.renamer.format_remote_topic(topic), offset,
                                     SENTINELS[offset], "the same on the destination")
                    for (topic, partition), offset in sorted(offsets.items()) if offset in SENTINELS]
        out[label] = TranslatedOffsets(sorted(answers, key=lambda p: (p.topic, p.partition)), live, positions.origin,
                                       known_id, destination_id)
    return out
