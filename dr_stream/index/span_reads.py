"""The destination's copies in the windows of positions inside spans, read for one round of
translations (`spans` holds the rule; this is its I/O).

A round first hands over every `within` answer it got (`read`): the windows are read in as few
reads as cover them (`spans.reads_of`: windows of one partition close together in one range,
partitions side by side), each span's origin cluster's copies taken by the provenance rule of
`destination_tail`. Then each position is placed from the copies read in its window (`place`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from dr_stream.core.policy import TopicRenamer
from dr_stream.index.destination_tail import read_tail
from dr_stream.index.run_store import Located, Run
from dr_stream.index.spans import reads_of, resolved
from dr_stream.kafka.clients import LentConsumer
from dr_stream.kafka.cluster_context import ClusterContext

# (destination topic, partition), (first, last) of a range read
Read = tuple[tuple[str, int], tuple[int, int]]


class SpanReads:
    """One translator's reads of span windows; `reader` lends the destination consumer to read with."""

    def __init__(self, destination: ClusterContext, header: str, renamer: TopicRenamer,
                 reader: Callable[[], LentConsumer]) -> None:
        self.destination, self.header, self.renamer, self.reader = destination, header, renamer, reader
        self._read: list[tuple[Read, list[Run]]] = []

    def read(self, inside: Iterable[Located]) -> None:
        """Reads the windows of a round's `within` answers (the previous round's reads are dropped)."""
        self._read = []
        windows = {(f.span.dest_topic, f.span.dest_partition, *f.window): f.span.origin_cluster
                   for f in inside if f.span is not None and f.window is not None}
        for origin in sorted(set(windows.values())):
            for ranges in reads_of(w for w, cluster in windows.items() if cluster == origin):
                runs = read_tail(self.destination, {tp: (first, last + 1) for tp, (first, last) in ranges.items()},
                                 self.header, origin, self.renamer, reader=self.reader())
                self._read.extend(((tp, span), runs) for tp, span in ranges.items())

    def place(self, found: Located, offset: int) -> Located:
        """A `within` answer for origin offset `offset`, placed exactly from the copies read in its
        window (at most the span's slack + 1 records)."""
        span, window = found.span, found.window
        assert span is not None and window is not None
        copies = [r for (tp, (first, last)), runs in self._read
                  if tp == (span.dest_topic, span.dest_partition) and first <= window[0] and window[1] <= last
                  for r in runs]
        return replace(resolved(span, offset, copies), last_copied=found.last_copied)
