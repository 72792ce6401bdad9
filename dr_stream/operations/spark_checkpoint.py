"""`dr-stream failover --spark-checkpoint URI`: a Structured Streaming query's own positions,
moved to the destination inside its checkpoint.

A query that reads Kafka keeps where it stands in its checkpoint, not in a consumer group:
`offsets/<N>` holds where batch N ends for each source, and `commits/<N>` appears once batch
N's output is written. Restarted, Spark reads the newest offsets file N and the one before it:
when N is committed it plans batch N+1 from N's end; when not, it runs N again, from N-1's end
to N's. Both files name source offsets, which mean other records on the destination. This
command translates the Kafka sources' offsets in those two files through the flow's index
(each position as `translate --offsets` would) and rewrites them under the destination's topic
names, so the query, restarted against the destination with its subscription renamed as the
flow renames topics, reads every record after its last processed one once: a batch it runs
again reads the same records it read on the source.

Invariants:
- Nothing is written when anything is refused: a path that is not a checkpoint, no Kafka
  source, a topic the flow does not copy, offsets beyond the source's ends, a checkpoint that
  dr-stream already moved to another cluster than this flow's source, or a position with no
  destination offset.
- Before a file changes, its original and the whole change (every file's new text) are kept in
  `<checkpoint>/dr-stream-failover/<time>/`; a change interrupted half-way is finished from
  there, never translated twice. `undo_move` puts the originals back while the query has not
  run a batch since.
- Every file goes through Hadoop's FileSystem (`state_paths`): local, `hdfs://` and `s3a://`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from dr_stream.core.config import FlowConfig
from dr_stream.core.offset_log import OffsetLogError, OffsetLogFile, Partition, batch_ids, newest_batch, parse
from dr_stream.failure_notes import first_line
from dr_stream.kafka.cluster_context import FlowClusters
from dr_stream.operations.application_offsets import (
    OffsetsError,
    TranslatedOffset,
    translate_offset_sets,
)
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.runtime.state_paths import qualified, read_text, write_text

CHANGES = "dr-stream-failover"  # beside offsets/ and commits/: Spark reads neither this nor its files
CHANGE_FILE = "change.json"


class CheckpointError(ValueError):
    """A checkpoint that cannot be moved as asked: one line naming it and why."""


def batches_to_rewrite(offset_batches: list[int]) -> list[int]:
    """The files a restarted query reads: the newest batch, and the one before it (the start of
    a batch Spark runs again, or, after a committed one, the range Spark replays its sources'
    bookkeeping over)."""
    return offset_batches[-2:]


def renamed(answers: list[TranslatedOffset]) -> dict[Partition, int]:
    """A source's new offsets: each position's answer under the destination's topic name."""
    out: dict[Partition, int] = {}
    for a in answers:
        if a.offset is None:
            raise CheckpointError(f"{a.topic}[{a.partition}] at {a.source_offset} has no destination offset "
                                  f"({a.method}{': ' + a.note if a.note else ''})")
        out[(a.dest_topic, a.partition)] = a.offset
    return out


def label(batch: int, source: int) -> str:
    return f"offsets/{batch} source {source}"


@dataclass(frozen=True)
class Change:
    """What a move writes, kept in its own directory before any offsets file changes."""

    directory: str
    checkpoint: str
    flow: str
    source: dict[str, str | None]
    destination: dict[str, str | None]
    files: dict[str, str]  # offsets/N -> its new text
    state: str = "writing"  # then "done"; "undone" once its originals are back

    def as_dict(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "flow": self.flow, "from": self.source, "to": self.destination,
                "files": self.files, "state": self.state}

    @staticmethod
    def of(directory: str, document: dict[str, Any]) -> Change:
        return Change(directory, document["checkpoint"], document["flow"], document["from"], document["to"],
                      document["files"], document["state"])

    @staticmethod
    def read(directory: str, where: str, text: str) -> Change:
        """The change a record's text says; CheckpointError naming the file (`where`) when it is not
        one dr-stream wrote (cut short, or edited by hand)."""
        try:
            document = json.loads(text)
            change = Change.of(directory, document)
        except (ValueError, KeyError, TypeError) as exc:
            detail = f"no {exc.args[0]!r}" if isinstance(exc, KeyError) else first_line(exc)
            raise CheckpointError(f"{where}: not a change record dr-stream wrote ({detail}); move the directory "
                                  "aside once you have checked the checkpoint's offsets files") from None
        if not isinstance(change.files, dict) or not all(isinstance(t, str) for t in change.files.values()):
            raise CheckpointError(f"{where}: not a change record dr-stream wrote (its files are not texts)")
        return change


@dataclass(frozen=True)
class CheckpointMove:
    """What `failover --spark-checkpoint` found, decided and (unless a dry run) wrote."""

    checkpoint: str
    batches: list[int]
    committed: int | None
    positions: dict[str, list[TranslatedOffset]]  # per offsets/N source I
    source_reachable: bool
    origin: str
    change: str | None  # the directory the change and originals are in; None on a dry run
    dry_run: bool
    finished_earlier: bool = False  # an interrupted move finished from its own record

    @property
    def newest(self) -> int:
        return self.batches[-1]

    @property
    def inexact(self) -> list[TranslatedOffset]:
        return [p for ps in self.positions.values() for p in ps if not p.exact]

    def resumes(self) -> str:
        """How Spark goes on from the rewritten checkpoint."""
        if self.committed == self.newest:
            return f"batch {self.newest} was committed: the query goes on with batch {self.newest + 1}"
        return (f"batch {self.newest} was not committed: the query runs it again, over the same records, on the "
                "destination")

    def as_dict(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "dry_run": self.dry_run, "batches": self.batches,
                "committed": self.committed, "source_reachable": self.source_reachable, "origin": self.origin,
                "change": self.change, "resumes": self.resumes(),
                "positions": [{"file": key, **p.as_dict()} for key, ps in self.positions.items() for p in ps]}


class SparkCheckpoint:
    """A Structured Streaming checkpoint's offset and commit logs, read and written through
    Hadoop's FileSystem."""

    def __init__(self, spark: SparkSession, uri: str) -> None:
        self.spark = spark
        self.uri = uri.rstrip("/") or "/"

    def path(self, relative: str) -> str:
        return f"{self.uri}/{relative}"

    def names(self, relative: str) -> list[str] | None:
        """The file names in a directory of the checkpoint; None when there is no such directory."""
        path, fs = qualified(self.spark, self.path(relative))
        if not fs.exists(path) or not fs.getFileStatus(path).isDirectory():
            return None
        return [str(status.getPath().getName()) for status in fs.listStatus(path)]

    def qualified_uri(self) -> str:
        return str(qualified(self.spark, self.uri)[0].toString())

    def read(self, relative: str) -> str | None:
        return read_text(self.spark, self.path(relative))

    def write(self, relative: str, text: str) -> None:
        write_text(self.spark, self.path(relative), text)

    def offset_batches(self) -> list[int]:
        offsets = self.names("offsets")
        if offsets is None or self.read("metadata") is None:
            raise CheckpointError(f"{self.uri}: not a Spark Structured Streaming checkpoint (no metadata and "
                                  "offsets/ there)")
        return batch_ids(offsets)

    def newest_commit(self) -> int | None:
        return newest_batch(self.names("commits") or [])

    def offsets(self, batch: int) -> tuple[str, OffsetLogFile]:
        """The batch's offsets file as written (kept as the original) and read."""
        text = self.read(f"offsets/{batch}")
        if text is None:
            raise CheckpointError(f"{self.uri}: offsets/{batch} vanished while being read: is the query still running?")
        try:
            return text, parse(text, f"{self.uri}/offsets/{batch}")
        except OffsetLogError as exc:
            raise CheckpointError(str(exc)) from None

    def last_change(self) -> Change | None:
        """The newest change dr-stream made here, from its own record."""
        stamps = sorted(self.names(CHANGES) or [])
        for stamp in reversed(stamps):
            relative = f"{CHANGES}/{stamp}/{CHANGE_FILE}"
            text = self.read(relative)
            if text is not None:
                return Change.read(f"{CHANGES}/{stamp}", self.path(relative), text)
        return None

    def apply(self, change: Change) -> None:
        """Writes the change's files, then marks it done: run again after an interruption, it
        writes the same texts."""
        for relative, text in sorted(change.files.items()):
            self.write(relative, text)
        self.record(change, "done")

    def record(self, change: Change, state: str) -> None:
        marked = Change(**{**vars(change), "state": state})
        self.write(f"{change.directory}/{CHANGE_FILE}", json.dumps(marked.as_dict(), indent=2))


def _cluster(alias: str, cluster_id: str | None) -> dict[str, str | None]:
    return {"alias": alias, "cluster_id": cluster_id}


def _vet_earlier_change(checkpoint: SparkCheckpoint, config: FlowConfig, change: Change | None
                        ) -> Callable[[str | None], None]:
    """Refuses a checkpoint dr-stream already moved to a cluster other than this flow's source
    (its offsets are that cluster's now: translating them as the source's would be wrong)."""

    def vet(source_id: str | None) -> None:
        if change is None or change.state != "done":
            return
        now_on = change.destination
        if source_id is None or now_on["cluster_id"] == source_id:
            return
        raise CheckpointError(
            f"{checkpoint.uri}: its offsets are on {now_on['alias']} (cluster id {now_on['cluster_id']}) since "
            f"dr-stream moved them there ({change.directory}); this flow's source {config.source.alias} is cluster "
            f"id {source_id}")

    return vet


def _own_checkpoint(checkpoint: SparkCheckpoint, config: FlowConfig) -> bool:
    own = SparkCheckpoint(checkpoint.spark, config.streaming.checkpoint_dir).qualified_uri()
    mine = checkpoint.qualified_uri()
    return mine == own or mine.startswith(own + "/")


def move_checkpoint(config: FlowConfig, tables: FlowTables, spark: SparkSession, uri: str, dry_run: bool = False,
                    log: Callable[[str], None] = print, clusters: FlowClusters | None = None) -> CheckpointMove:
    """Translates the checkpoint's newest offsets files and (unless `dry_run`) rewrites them;
    `clusters`: the command's contexts (a drill's, a failback's), else the call's own."""
    checkpoint = SparkCheckpoint(spark, uri)
    if _own_checkpoint(checkpoint, config):
        raise CheckpointError(f"{checkpoint.uri}: is this flow's own checkpoint (streaming.checkpoint_dir), "
                              "not an application's")
    batches = batches_to_rewrite(checkpoint.offset_batches())
    if not batches:
        raise CheckpointError(f"{checkpoint.uri}: the query planned no batch yet, so no offset is kept: start it on "
                              "the destination as it is (its startingOffsets apply there too)")
    earlier = checkpoint.last_change()
    if earlier is not None and earlier.state == "writing":
        if dry_run:
            raise CheckpointError(f"{checkpoint.uri}: a move dr-stream began ({earlier.directory}) did not finish; "
                                  "run without --dry-run to finish it as it was decided")
        checkpoint.apply(earlier)  # interrupted half-way: finish it as decided then
        return CheckpointMove(checkpoint.uri, batches, checkpoint.newest_commit(), {}, False,
                              f"the change recorded in {earlier.directory}", earlier.directory, dry_run,
                              finished_earlier=True)
    read = {b: checkpoint.offsets(b) for b in batches}
    files = {b: parsed for b, (_, parsed) in read.items()}
    kafka = {b: f.kafka_sources for b, f in files.items()}
    if not kafka[batches[-1]]:
        raise CheckpointError(f"{checkpoint.uri}: offsets/{batches[-1]} names no Kafka source's offsets: dr-stream "
                              "moves a query's Kafka sources only")
    sets = {label(b, i): offsets for b, sources in kafka.items() for i, offsets in sources.items()}
    try:
        answers = translate_offset_sets(config, tables, sets, checkpoint.uri, log,
                                        vet_source=_vet_earlier_change(checkpoint, config, earlier),
                                        clusters=clusters)
    except OffsetsError as exc:
        raise CheckpointError(str(exc)) from None
    new_texts = {}
    for b, sources in kafka.items():
        rewritten = files[b]
        for i in sources:
            try:
                rewritten = rewritten.with_kafka(i, renamed(answers[label(b, i)].positions))
            except CheckpointError as exc:
                raise CheckpointError(f"{checkpoint.uri}: offsets/{b}: {exc}; nothing written") from None
        new_texts[f"offsets/{b}"] = rewritten.format()
    any_answer = next(iter(answers.values()))
    move = CheckpointMove(checkpoint.uri, batches, checkpoint.newest_commit(),
                          {key: a.positions for key, a in answers.items()}, any_answer.source_reachable,
                          any_answer.origin, None, dry_run)
    if dry_run:
        return move
    directory = f"{CHANGES}/{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    change = Change(directory, checkpoint.uri, config.name,
                    _cluster(config.source.alias, any_answer.source_cluster),
                    _cluster(config.destination.alias, any_answer.destination_cluster), new_texts)
    for b, (original, _) in read.items():
        checkpoint.write(f"{directory}/offsets/{b}", original)
    checkpoint.write(f"{directory}/{CHANGE_FILE}", json.dumps(change.as_dict(), indent=2))
    checkpoint.apply(change)
    return CheckpointMove(**{**vars(move), "change": checkpoint.path(directory)})


def undo_move(spark: SparkSession, uri: str) -> list[str]:
    """Puts back the offsets files the newest move replaced; one line per file. Refused once the
    query ran a batch after the move (its newer files name the destination's offsets)."""
    checkpoint = SparkCheckpoint(spark, uri)
    newest = checkpoint.offset_batches()[-1:]
    change = checkpoint.last_change()
    if change is None or change.state == "undone":
        raise CheckpointError(f"{checkpoint.uri}: no move by dr-stream to undo (none in {CHANGES}/ that is not "
                              "undone already)")
    moved = batch_ids([relative.removeprefix("offsets/") for relative in change.files])
    if newest and newest[-1] > moved[-1]:
        raise CheckpointError(f"{checkpoint.uri}: the query ran batch {newest[-1]} on {change.destination['alias']} "
                              f"since dr-stream moved it ({change.directory}): its offsets are that cluster's now")
    done = []
    for relative in sorted(change.files):
        original = checkpoint.read(f"{change.directory}/{relative}")
        if original is None:
            raise CheckpointError(f"{checkpoint.uri}: {change.directory}/{relative} is missing: nothing undone")
        checkpoint.write(relative, original)
        done.append(f"{checkpoint.uri}: {relative} is {change.source['alias']}'s again (from {change.directory})")
    checkpoint.record(change, "undone")
    return done
