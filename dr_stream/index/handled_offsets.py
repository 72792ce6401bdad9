"""Below which origin offset the replicate query has handled every record of a source partition
(copied or skipped) *and* the offset index holds the runs of those copies.

Two sources say so: a published run ending at origin offset E (the copy reads each partition in
order, so everything below E was handled; this is what real-time mode, whose batches end rarely,
relies on), and a batch's progress (a batch's runs are on the runs topic before it commits, so
once the feed has read up to where the topic ended when the progress arrived, it knows all of
them; this covers records skipped after the last copy).

A committed batch some of whose offsets may have delivered no record also leaves the ranges
[first, end) of its offsets no run copied (`RunStore.uncopied`): records the flow filtered out,
transaction markers, compacted records, and records deleted before they were read, which the
flow tells apart by the source's log start (`loss_watch.read_past`).

Invariant: `through` only moves forward; a batch counts only once every run it published is known.
Not thread-safe: the feed calls it under its lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dr_stream.index.run_store import RunStore

Partition = tuple[str, int]
# a batch's (start offsets, end offsets) per source partition
Spans = tuple[Mapping[Partition, int], Mapping[Partition, int]]


def spanned(spans: Spans | None) -> dict[Partition, tuple[int, int]]:
    """Each partition a batch read some offsets of, and those offsets [first, end)."""
    if spans is None:
        return {}
    starts, ends = spans
    return {k: (starts[k], end) for k, end in ends.items() if k in starts and end > starts[k]}


@dataclass
class CommittedBatch:
    ends: dict[Partition, int]
    spans: Spans | None
    # how far the runs topic must be read before the batch counts (None: not asked yet)
    runs_needed: int | None = None


@dataclass
class HandledOffsets:
    through: dict[Partition, int] = field(default_factory=dict)
    # the end of the last batch counted, per partition: no offset below it is asked again
    counted: dict[Partition, int] = field(default_factory=dict)
    _batches: list[CommittedBatch] = field(default_factory=list)
    _uncopied: dict[Partition, list[tuple[int, int]]] = field(default_factory=dict)

    def run_published(self, origin: Partition, origin_end: int) -> None:
        if origin_end + 1 > self.through.get(origin, -1):
            self.through[origin] = origin_end + 1

    def batch_committed(self, ends: Mapping[Partition, int], spans: Spans | None) -> None:
        self._batches.append(CommittedBatch(dict(ends), spans))

    def first_waiting(self) -> CommittedBatch | None:
        return self._batches[0] if self._batches else None

    def count_first(self, store: RunStore) -> bool:
        """The first waiting batch counts now (its runs are all in `store`); True when it moved a partition."""
        batch = self._batches.pop(0)
        moved = False
        for key, offset in batch.ends.items():
            if offset > self.through.get(key, -1):
                self.through[key] = offset
                moved = True
        for key, (first, end) in spanned(batch.spans).items():
            gaps = store.uncopied(key, first, end)
            if gaps:
                self._uncopied.setdefault(key, []).extend(gaps)
        for key, offset in batch.ends.items():
            self.counted[key] = offset  # a recreated topic's next batch ends lower
        return moved

    def take_uncopied(self) -> dict[Partition, list[tuple[int, int]]]:
        taken, self._uncopied = self._uncopied, {}
        return taken

    def next_to_handle(self, last_copied: Mapping[Partition, int]) -> dict[Partition, int]:
        out = {key: last + 1 for key, last in last_copied.items()}
        for key, offset in self.through.items():
            out[key] = max(out.get(key, 0), offset)
        return out
