"""One file of a Spark Structured Streaming query's offset log, `<checkpoint>/offsets/<N>`.

Spark writes, for batch N, a version line, the batch's metadata (one JSON line: watermark,
timestamp, the SQL confs the checkpoint pins), then one line per source of the query, in the
order of its sources: the offset that source's batch N ends at, as the source's own JSON, or
`-` when the source had nothing. Version 1 lines are the offset alone; version 2 (queries with
named sources) prefix it with the source's name and a colon. A Kafka source's offset is
`{"topic": {"partition": offset}}`, each offset the next one to read once the batch is done.

Invariant: `format(parse(text))` is `text` for a file read as written, and a file whose Kafka
offsets were replaced differs from the original in those offsets' JSON only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

Partition = tuple[str, int]
NO_OFFSET = "-"


class OffsetLogError(ValueError):
    """A file that is not an offset log file Spark wrote."""


@dataclass(frozen=True)
class SourceOffset:
    """One source's line: its name (version 2 logs only) and its offset's JSON as Spark wrote it."""

    name: str | None
    offset: str

    def kafka(self) -> dict[Partition, int] | None:
        """The offsets when this is a Kafka source's line (topic -> partition -> offset), else None
        (another source: a file source's `{"logOffset": 3}`, the rate source's number)."""
        return kafka_offsets(self.offset)

    def line(self) -> str:
        return self.offset if self.name is None else f"{self.name}:{self.offset}"


@dataclass(frozen=True)
class OffsetLogFile:
    version: int
    metadata: str
    sources: tuple[SourceOffset, ...]
    ending: str = ""  # a newline after the last line, when the file had one

    @property
    def kafka_sources(self) -> dict[int, dict[Partition, int]]:
        """Per source index, its offsets, for the Kafka sources among them."""
        return {i: found for i, s in enumerate(self.sources) if (found := s.kafka()) is not None}

    def with_kafka(self, index: int, offsets: dict[Partition, int]) -> OffsetLogFile:
        """The same file with source `index`'s offsets replaced (topics as given)."""
        sources = list(self.sources)
        sources[index] = replace(sources[index], offset=kafka_json(offsets))
        return replace(self, sources=tuple(sources))

    def format(self) -> str:
        return "\n".join([f"v{self.version}", self.metadata, *(s.line() for s in self.sources)]) + self.ending


def parse(text: str, where: str) -> OffsetLogFile:
    """An offset log file's parts; `where` names it in the one line an error says."""
    ending = "\n" if text.endswith("\n") else ""
    lines = text.removesuffix("\n").split("\n")
    if len(lines) < 2 or not lines[0].startswith("v") or not lines[0][1:].isdigit():
        raise OffsetLogError(f"{where}: not a Spark offset log file (its first line is not a version like v1)")
    version = int(lines[0][1:])
    if version not in (1, 2):
        raise OffsetLogError(f"{where}: offset log version {version} is not one dr-stream reads (1 or 2)")
    sources = []
    for line in lines[2:]:
        if version == 1:
            sources.append(SourceOffset(None, line))
        else:
            name, colon, offset = line.partition(":")
            if not colon or not name or '"' in name or "{" in name:
                raise OffsetLogError(f"{where}: a version 2 source line without its source's name: {line[:60]!r}")
            sources.append(SourceOffset(name, offset))
    for i, source in enumerate(sources):
        if source.offset != NO_OFFSET and not _is_json(source.offset):
            raise OffsetLogError(f"{where}: source {i}'s offset is not JSON: {source.offset[:60]!r}")
    return OffsetLogFile(version, lines[1], tuple(sources), ending)


def _is_json(text: str) -> bool:
    """Every source's offset is JSON as the source wrote it (Spark's `Offset.json`)."""
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


def kafka_offsets(text: str) -> dict[Partition, int] | None:
    """`{"topic": {"partition": offset}}` -> {(topic, partition): offset}; None for any other
    shape (the offset of a source that is not Kafka, or no offset)."""
    if not text.startswith("{"):
        return None
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(document, dict) or not document:
        return None
    out: dict[Partition, int] = {}
    for topic, partitions in document.items():
        if not isinstance(partitions, dict):
            return None
        for partition, offset in partitions.items():
            if not (isinstance(partition, str) and partition.isdigit()) or isinstance(offset, bool) \
                    or not isinstance(offset, int):
                return None
            out[(topic, int(partition))] = offset
    return out


def kafka_json(offsets: dict[Partition, int]) -> str:
    """Spark's own shape for a Kafka source's offset: compact, topics and partitions in order."""
    document: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        document.setdefault(topic, {})[str(partition)] = offset
    return json.dumps(document, separators=(",", ":"))


def newest_batch(names: list[str]) -> int | None:
    """The highest batch id among a log directory's file names."""
    ids = batch_ids(names)
    return ids[-1] if ids else None


def batch_ids(names: list[str]) -> list[int]:
    """The batch ids among a log directory's file names, lowest first (checksums and temporary
    files are not batches)."""
    return sorted(int(n) for n in names if n.isdigit())
