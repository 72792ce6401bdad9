"""Gathers what the translation rule needs from the offset index and the clusters, and applies it.

The rule itself is in `translation_rule` and `index.run_store`; this class only reads: where a commit
lands in the index runs (`locate`: the flow's live store, or a store loaded from the table),
the destination's log bounds and, where the rule asks, offsets by timestamp (admin client and
consumer), the source's log ends, and returned records. No Spark: `failover` runs it without
a JVM.

Invariant: constructing a translator opens no connection; its clients are opened at first use
and released by `close`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import partial

from confluent_kafka import TopicPartition

from dr_stream.core.contracts import PROVENANCE_HEADER
from dr_stream.core.policy import TopicRenamer
from dr_stream.index import Located, RunKey, SpanReads
from dr_stream.kafka import clients
from dr_stream.kafka.admin import log_bounds
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.positions.consumer_timestamps import GroupCommit
from dr_stream.positions.returned_records import LookUp, ReturnedRecords
from dr_stream.positions.translation_rule import (
    Translation,
    needs_timestamp,
    returned_look_ups,
    settle,
    through_returned,
)

# where an origin offset lands in the index's runs of one partition pair
Locate = Callable[[RunKey, int], Located]


class OffsetTranslator:
    """Translates commits through the flow's offset index and the destination's logs."""

    def __init__(self, locate: Locate, renamer: TopicRenamer,
                 destination: ClusterContext, source: ClusterContext | None = None,
                 known_source_ends: dict[tuple[str, int], int] | None = None,
                 returned: ReturnedRecords | None = None, shared: bool = False,
                 header: str = PROVENANCE_HEADER) -> None:
        """Both clusters' admin clients are their contexts'; `shared`: the destination's records
        are read with its context's one reader, lent (a command's), else with a consumer of the
        translator's own (a loop's, on its own thread)."""
        self.locate = locate
        self.renamer = renamer
        self.destination = destination
        # None when the source is gone: the log ends it last reported stand in for the live ones.
        self.source = source
        self.known_source_ends = known_source_ends or {}
        self.returned = returned
        self._dest_consumer: clients.OnDemandConsumer | clients.LentConsumer = destination.reader() if shared \
            else destination.consumer("dr-stream-translate")
        # copies inside span windows, read with the same consumer (`header`: the provenance header)
        self._spans = SpanReads(destination, header, renamer, self._lent_reader)

    def _found(self, commit: GroupCommit) -> Located:
        dest_topic = self.renamer.format_remote_topic(commit.topic)
        return self.locate((commit.topic, commit.partition, dest_topic, commit.partition), commit.offset)

    def located(self, commit: GroupCommit, found: Located, now: int, source_log_end: int | None = None
                ) -> Translation:
        """The commit placed through the index runs (`found`), before the destination's logs are
        consulted."""
        dest_topic = self.renamer.format_remote_topic(commit.topic)
        if found.method == "within":
            found = self._spans.place(found, commit.offset)
        method = "timestamp" if found.method == "unknown" else found.method
        note = ""
        if found.method == "window" and found.window is not None:
            first, last = found.window
            note = (f"fallback: inside a span, destination offsets {first}-{last} held no copy of ours (deleted, "
                    f"or their provenance is not this flow's); resumes at {first}, reading at most "
                    f"{last - first + 1} records again")
        return Translation(group=commit.group, topic=commit.topic, partition=commit.partition,
                           source_offset=commit.offset, source_timestamp=commit.timestamp, dest_topic=dest_topic,
                           dest_partition=commit.partition, offset=found.offset, method=method, note=note,
                           clamped=False, log_start=None, log_end=None, last_copied=found.last_copied,
                           source_log_end=source_log_end, translated_at=now)

    def translate(self, commits: Iterable[GroupCommit]) -> list[Translation]:
        now = int(time.time() * 1000)
        commits = list(commits)
        if not commits:
            return []
        source_ends = self._source_ends(sorted({(c.topic, c.partition) for c in commits}))
        founds = [self._found(c) for c in commits]
        self._spans.read(f for f in founds if f.method == "within")
        placed = [self.located(c, f, now, source_ends.get((c.topic, c.partition))) for c, f in zip(commits, founds,
                                                                                                    strict=True)]
        bounds = log_bounds(self.destination.admin, sorted({(t.dest_topic, t.dest_partition) for t in placed}))
        originals = self._originals(placed, source_ends)
        out = []
        for t in placed:
            if self.returned is not None:
                t = through_returned(t, partial(_original, originals, t))
            found = bounds.get((t.dest_topic, t.dest_partition))
            by_timestamp = self._offset_for_time(t) if needs_timestamp(t, found) else None
            out.append(settle(t, found, by_timestamp))
        return sorted(out, key=lambda t: t.key)

    def _originals(self, placed: list[Translation], source_ends: dict[tuple[str, int], int]
                   ) -> dict[LookUp, int | None]:
        """Every returned-record look-up the round's translations need, in one batch."""
        if self.returned is None:
            return {}
        return self.returned.originals({(t.topic, t.partition, o, t.dest_topic) for t in placed
                                        for o in returned_look_ups(t)}, source_ends)

    def _lent_reader(self) -> clients.LentConsumer:
        consumer = self._dest_consumer
        return consumer if isinstance(consumer, clients.LentConsumer) else clients.LentConsumer(consumer)

    def _offset_for_time(self, t: Translation) -> int | None:
        wanted = TopicPartition(t.dest_topic, t.dest_partition, t.source_timestamp)
        found = self._dest_consumer.get().offsets_for_times([wanted], timeout=15)[0]
        return found.offset if found.offset >= 0 else None

    def _source_ends(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        if self.source is None:
            return dict(self.known_source_ends)
        try:
            return {k: end for k, (_, end) in log_bounds(self.source.admin, partitions, timeout=5).items()}
        except Exception:  # the source may be down (that is what failover is for): ends unknown
            return {}

    def close(self) -> None:
        self._dest_consumer.close()
        if self.returned is not None:
            self.returned.close()


def _original(originals: dict[LookUp, int | None], t: Translation, offset: int) -> int | None:
    """The origin offset the returned record at `offset` of `t`'s destination topic came from."""
    return originals[(t.topic, t.partition, offset, t.dest_topic)]
