"""A flow's watch for what its source took away: records deleted before the flow read them,
records it took back after they were copied, and topics deleted and created again.

Spark's Kafka source, told not to fail on data loss (a flow must not stop for good because a
partition aged out), only logs a warning and reads on from the log start; and it knows a topic
only by name, so a topic created again under the same name is read on from the old topic's
offsets (records below them skipped, silently). The watch runs where the flow (re)starts its
replicate query, before Spark reads:

- retention: the next offset the checkpoint says the query reads of each partition (or past the
  resume mark) against the partition's log start; each gap is recorded (`losses`);
- rewind: a partition whose log ends at or below what was copied, or whose record at the last
  copied offset is not the one copied (compared once per process: the source was cut back and
  written past it again); recorded as `offsets-rewound` from where it was cut back, the offset
  index cuts the old runs there (`RunStore.rewind`), and a new checkpoint reads it from there;
- recreation: each subscribed topic's id against the one recorded at the last start
  (`<checkpoint_dir>/source-topic-ids.json`). A topic with a new id is recorded as
  `topic-recreated` (what of the old topic was left uncopied is unknown now), with the
  destination offset its new copies start at, so the offset index keeps its old runs apart
  (`RunStore.begin_life`); its resume marks go; and the query starts on a new checkpoint that
  reads the new topic from its first record and every other partition from where it was.
The same new start (a new checkpoint, the old one renamed aside) reads a partition an operator
released from a hold (`holds`) from the offset given. While the query runs, `source_changed`
tells the flow to restart when an id changes or a log ends below what was copied, and `read_past`
records the records retention deleted just before a batch read them: offsets a committed batch
read past without a copy that are below the log start by the next check, a second or so later.

Invariant: the watch never holds the query back: a check that fails (a cluster away, a
checkpoint it cannot read) is said in one line and the query starts all the same.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Literal

from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from dr_stream.core.config import FlowConfig
from dr_stream.kafka.admin import log_bounds, topic_ids
from dr_stream.kafka.record_reads import read_records
from dr_stream.replication.adoption import adopted_start, resume_offsets
from dr_stream.replication.checkpoint_positions import EARLIEST, next_to_read, specific_offsets
from dr_stream.replication.flow_metrics import FlowMetrics
from dr_stream.replication.losses import Loss, LossLedger, record_found, retention_losses, skipped_losses
from dr_stream.runtime.state_paths import move_aside, read_text, write_text

if TYPE_CHECKING:
    from dr_stream.index import IndexFeed

Partition = tuple[str, int]
# The longest a deletion the running query is still crossing is held back before it is recorded.
SETTLE_S = 60.0
# why the replicate query starts on a new checkpoint: the old one's name, and the words said
NewCheckpointCause = Literal["recreated", "rewound", "released"]
_NEW_CHECKPOINT_BECAUSE: dict[NewCheckpointCause, str] = {
    "recreated": "deleted and created again", "rewound": "the source took records back",
    "released": "a held record was released"}


def handled_through(read: dict[Partition, int], marks: dict[Partition, int],
                    replicated: dict[str, int]) -> dict[Partition, int]:
    """Per partition of `replicated`, the first offset not handled yet: the next the checkpoint
    reads, or past the resume mark when that is further on. The checkpoint can be behind what was
    copied (its progress is written after the batch), and a record copied before a stop was not
    lost to a retention that deleted it after."""
    out = {k: o for k, o in read.items() if k[0] in replicated}
    for key, mark in marks.items():
        if key[0] in replicated:
            out[key] = max(out.get(key, 0), mark + 1)
    return out


def recreated_topics(recorded: dict[str, str], now: dict[str, str]) -> list[str]:
    """The topics whose id changed since it was recorded (a topic not recorded yet is new, not recreated)."""
    return sorted(t for t, topic_id in now.items() if t in recorded and recorded[t] != topic_id)


def recreation_losses(recreated: list[str], replicated: dict[str, int], positions: dict[Partition, int],
                      dest_ends: dict[Partition, int], remote: Callable[[str], str], now: dt.datetime) -> list[Loss]:
    """A `topic-recreated` entry per partition of each recreated topic: from the next offset the
    flow was to read of the old topic, an unknown number of records (that topic is gone), and the
    destination offset the new topic's copies start at."""
    return [Loss(t, p, positions.get((t, p), 0), -1, -1, "topic-recreated", now, dest_ends.get((remote(t), p), 0))
            for t in recreated for p in range(replicated[t])]


def first_differing(lo: int, hi: int, differs: Callable[[int], bool | None]) -> int:
    """The first offset in [lo, hi] whose source record is not the one copied, where `hi`'s is not
    and, once they part, none after is (a log cut back at one offset and written again). An offset
    that cannot be compared ends the search at the lowest candidate: copying a record again is
    better than skipping one."""
    while lo < hi:
        mid = (lo + hi) // 2
        found = differs(mid)
        if found is None:
            return lo
        lo, hi = (lo, mid) if found else (mid + 1, hi)
    return lo


def rewind_losses(rewound: Mapping[Partition, tuple[int, int]], dest_ends: Mapping[Partition, int],
                  now: dt.datetime) -> list[Loss]:
    """An `offsets-rewound` entry per partition (log end, last copied origin offset): offsets from
    the log end through the last copied are of records the source took back (an unclean leader
    election, a truncation); the destination keeps its copies of them, and the records the source
    writes at those offsets again are copied from the destination offset given on."""
    return [Loss(t, p, end, last, last - end + 1, "offsets-rewound", now, dest_ends.get((t, p), 0))
            for (t, p), (end, last) in sorted(rewound.items())]


def starting_offsets(replicated: dict[str, int], positions: dict[Partition, int], recreated: list[str]) -> str:
    """The new checkpoint's start, as Spark's specific offsets (every partition named): a
    recreated topic from its first record, every other partition where the flow was."""
    return specific_offsets(replicated, {k: o for k, o in positions.items() if k[0] not in recreated}, EARLIEST)


class LossWatch:
    def __init__(self, spark: SparkSession, config: FlowConfig, ledger: LossLedger, source_admin: AdminClient,
                 dest_admin: AdminClient, metrics: FlowMetrics, log: Callable[[str], None],
                 feed: IndexFeed | None) -> None:
        self.spark, self.config, self.ledger = spark, config, ledger
        self.source_admin, self.dest_admin, self.metrics, self.log = source_admin, dest_admin, metrics, log
        self.feed = feed  # None without an offset index: nothing to keep apart in it
        self.ids_uri = f"{config.streaming.checkpoint_dir.rstrip('/')}/source-topic-ids.json"
        self._ids: dict[str, str] = {}
        self._compared = False
        self._starting: str | None = None
        self._read_past: dict[Partition, list[tuple[int, int]]] = {}
        self._under_way_since: dt.datetime | None = None

    def at_start(self, replicated: dict[str, int], marks: dict[Partition, int],
                 held: Mapping[Partition, int] | None = None,
                 resume_at: Mapping[Partition, int] | None = None,
                 rewound: Mapping[Partition, tuple[int, int]] | None = None) -> dict[Partition, int]:
        """Records what the source took from `replicated` (topic -> partitions) before the query,
        about to start, reads it, and readies the start (`source_options`). `marks` are the resume
        marks (records at or below are on the destination, or were left out); returns them less
        those of recreated topics. `held`: partitions held at a refused record, which the query
        has handled up to it only; `resume_at`: partitions an operator skipped a held record of,
        which a new checkpoint reads from the offset given (`holds`); `rewound`: partitions whose
        source log ends at or below what was copied ((log end, last copied origin offset))."""
        self._starting = None
        recreated: list[str] = []
        rewound_now: set[Partition] = set()
        try:  # what the last query read past, all of it now: the checkpoint is about to move on
            self.read_past(self.feed.take_uncopied() if self.feed is not None else {}, settle=True)
        except Exception as exc:
            self.log(f"losses: could not compare what the last query read past with the source ({exc})")
        try:
            read = next_to_read(self.spark, self.config.replicate_checkpoint)
            positions = handled_through(read, marks, replicated)
            resume_at = {k: o for k, o in (resume_at or {}).items() if k[0] in replicated}
            positions.update({k: o for k, o in {**(held or {}), **resume_at}.items() if k[0] in replicated})
            ids = topic_ids(self.source_admin, sorted(replicated))
            recorded = json.loads(read_text(self.spark, self.ids_uri) or "{}")
            recreated = recreated_topics(recorded, ids)
            now = dt.datetime.now(dt.UTC)
            found = [] if not read and self.config.streaming.starting_offsets == "latest" else retention_losses(
                {k: o for k, o in positions.items() if k[0] not in recreated}, self._log_starts(positions), now)
            if recreated:
                found += self._recreated(recreated, replicated, positions, now)
            rewound = {k: v for k, v in (rewound or {}).items() if k[0] in replicated and k[0] not in recreated}
            if not self._compared:  # written again past the last copy while the flow was away
                self._compared = True
                rewound.update(self.refilled({k: o for k, o in marks.items() if k[0] in replicated
                                              and k[0] not in recreated and k not in rewound}))
            if rewound:
                rewound_now = set(rewound)
                found += self._rewound(rewound, now)
                positions.update({k: end for k, (end, _) in rewound.items()})
            if recreated or resume_at or rewound:
                self._start_anew(replicated, positions, recreated, now, "recreated" if recreated
                                 else "rewound" if rewound else "released")
            elif not read:
                self._starting = self._adopted_start(replicated)
            record_found(self.ledger, self.spark, found, self.log,
                         lambda loss: self.metrics.records_lost(loss.topic, loss.cause, loss.records))
            # A topic missing right now (deleted, not created again yet) keeps its old id, so its
            # return under a new one is still seen.
            self._ids = {**recorded, **ids}
            if self._ids != recorded:
                write_text(self.spark, self.ids_uri, json.dumps(self._ids, sort_keys=True))
        except Exception as exc:  # never a reason not to copy; said, and checked again at the next start
            self.log(f"losses: could not compare the source with what the checkpoint says was read ({exc})")
        # Once the start reads a recreated topic from its first record, or a rewound partition from
        # where it was cut back, no mark of what was copied before may skip one.
        return marks if self._starting is None else {k: o for k, o in marks.items()
                                                     if k[0] not in recreated and k not in rewound_now}

    def _adopted_start(self, replicated: dict[str, int]) -> str | None:
        """A first query's start past what `adopt` took over: without it the query would read
        every adopted record again only to skip it."""
        resume = resume_offsets(read_text(self.spark, self.config.adopted_record))
        start = adopted_start(replicated, resume, self.config.streaming.starting_offsets == "earliest")
        if start is not None:
            adopted = {k: o for k, o in resume.items() if k[0] in replicated}
            self.log(f"the replicate query's first start: {len(adopted)} partitions read from where the adopted copies "
                     f"end ({self.config.adopted_record}), the rest from {self.config.streaming.starting_offsets}")
        return start

    def _log_starts(self, positions: dict[Partition, int]) -> dict[Partition, int]:
        return {k: start for k, (start, _) in log_bounds(self.source_admin, sorted(positions)).items()}

    def _recreated(self, recreated: list[str], replicated: dict[str, int], positions: dict[Partition, int],
                   now: dt.datetime) -> list[Loss]:
        remote = self.config.renamer.format_remote_topic
        dests = [(remote(t), p) for t in recreated for p in range(replicated[t])]
        dest_ends = {k: end for k, (_, end) in log_bounds(self.dest_admin, dests).items()}
        losses = recreation_losses(recreated, replicated, positions, dest_ends, remote, now)
        if self.feed is not None:
            self.feed.begin_lives({(remote(x.topic), x.partition): x.destination_offset or 0 for x in losses})
        self.log(f"source topics {', '.join(recreated)} were deleted and created again: their new records are copied "
                 f"from their first offset, and the old topic's runs are kept out of the offset index")
        return losses

    def refilled(self, marks: dict[Partition, int]) -> dict[Partition, tuple[int, int]]:
        """Partitions whose source record at the last copied offset is not the one copied: the
        source was cut back and wrote past it again while the flow was away. Per partition, (the
        first offset whose record differs, the last copied): the new records from there are copied
        again. One record is read per partition from each cluster, once per process."""
        if self.feed is None or not marks:
            return {}
        remote = self.config.renamer.format_remote_topic
        dests = {k: (remote(k[0]), k[1]) for k in marks}
        copies = {k: o for k in marks if (o := self.feed.copy_at(k, dests[k], marks[k])) is not None}
        sources = read_records(self.config.source, {k: marks[k] for k in copies})
        copied = read_records(self.config.destination, {dests[k]: o for k, o in copies.items()})
        parted = [k for k in sources if dests[k] in copied and not sources[k].same_as(copied[dests[k]])]
        starts = {k: start for k, (start, _) in log_bounds(self.source_admin, sorted(parted)).items()} if parted else {}
        return {k: (first_differing(starts.get(k, 0), marks[k], partial(self._differs, k, dests[k])), marks[k])
                for k in parted}

    def _differs(self, origin: Partition, dest: Partition, offset: int) -> bool | None:
        at = self.feed.copy_at(origin, dest, offset) if self.feed else None
        if at is None:
            return None
        source = read_records(self.config.source, {origin: offset}).get(origin)
        copy = read_records(self.config.destination, {dest: at}).get(dest)
        return None if source is None or copy is None else not source.same_as(copy)

    def _rewound(self, rewound: dict[Partition, tuple[int, int]], now: dt.datetime) -> list[Loss]:
        """An `offsets-rewound` entry per partition whose log now ends at or below what was copied:
        the copies of its records from the log end on are of records the source no longer has, and
        the records it writes there again are new ones, copied after them (`rewind_losses`)."""
        remote = self.config.renamer.format_remote_topic
        dests = {k: (remote(k[0]), k[1]) for k in rewound}
        dest_ends = {k: end for k, (_, end) in log_bounds(self.dest_admin, sorted(dests.values())).items()}
        losses = rewind_losses(rewound, {k: dest_ends.get(d, 0) for k, d in dests.items()}, now)
        if self.feed is not None:
            self.feed.rewind({dests[(x.topic, x.partition)]: (x.first_offset, x.destination_offset or 0)
                              for x in losses})
        return losses

    def _start_anew(self, replicated: dict[str, int], positions: dict[Partition, int], recreated: list[str],
                    now: dt.datetime, cause: NewCheckpointCause) -> None:
        """Readies a start on a new checkpoint: where the old one reads a partition is not where it
        must. `cause` names the old checkpoint's place and what is said."""
        self._starting = starting_offsets(replicated, positions, recreated)
        moved = move_aside(self.spark, self.config.replicate_checkpoint, f"before-{cause}-{now:%Y%m%dT%H%M%SZ}")
        why = _NEW_CHECKPOINT_BECAUSE[cause]
        self.log(f"the replicate query starts on a new checkpoint ({why}), from where the flow was in every other "
                 f"partition (the old one is {moved})")

    def source_options(self, options: dict[str, str]) -> dict[str, str]:
        """The replicate query's source options with the start `at_start` readied, if any."""
        return options if self._starting is None else {**options, "startingOffsets": self._starting}

    def read_past(self, uncopied: Mapping[Partition, list[tuple[int, int]]], settle: bool = False) -> None:
        """While the query runs: records what of the ranges its batches read past without a copy
        (`IndexFeed.take_uncopied`) the source had deleted before they were read
        (`skipped_losses`). A deletion the batches are still crossing is held back until they
        cross its end, for one entry, at most `SETTLE_S` (or until `settle`: a restart); ranges
        whose check fails are kept for the next call."""
        for key, ranges in uncopied.items():
            self._read_past.setdefault(key, []).extend(ranges)
        if not self._read_past:
            return
        now = dt.datetime.now(dt.UTC)
        settle = settle or (self._under_way_since is not None and
                            (now - self._under_way_since).total_seconds() >= SETTLE_S)
        starts = self._log_starts(dict.fromkeys(self._read_past, 0))
        found, under_way = skipped_losses(self._read_past, starts, now, settle)
        record_found(self.ledger, self.spark, found, self.log,
                     lambda loss: self.metrics.records_lost(loss.topic, loss.cause, loss.records))
        self._read_past = under_way
        self._under_way_since = (self._under_way_since or now) if under_way else None

    def source_changed(self, marks: dict[Partition, int]) -> str | None:
        """Why the running query must restart, if the source changed under it: a subscribed topic
        created again (a new id), or a partition whose log ends below what was already copied."""
        recreated = recreated_topics(self._ids, topic_ids(self.source_admin, sorted(self._ids)))
        if recreated:
            return f"source topics deleted and created again: {recreated}"
        ends = log_bounds(self.source_admin, sorted(marks))
        below = sorted(k for k, o in marks.items() if k in ends and ends[k][1] <= o)
        if below:
            self._compared = False  # written past the last copy again by the restart, it is still found
        return f"source partitions end below what was copied: {below}" if below else None
