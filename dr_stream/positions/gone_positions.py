"""Positions whose group or topic is gone from the source, and when a flow forgets them.

A flow remembers each position it translated (group, topic, partition): in its driver's maps,
its metric series and its translation log. Groups come and go (a console consumer's random
group id, an application retired, offsets expired after `offsets.retention.minutes`) and
topics are deleted; what the flow keeps must follow what exists, not everything it ever saw.

The source's group coordinators say what exists: a deleted group, an expired offset and a
deleted topic's offsets all leave the committed offsets (a tombstone in `__consumer_offsets`).
So a full read of the source's committed offsets (`SourceGroups`) is the evidence, and only a
read that answered: a source that is down or a group whose offsets could not be read says
nothing, so a disaster never makes a flow forget what failover needs. A position absent from
every read for `after_s` is gone (`GonePositions`): the delay covers a commit that reached the
flow before its group's coordinator wrote it, and a group deleted and made again at once.

Everything here is a rule over plain values; the poller takes the reads, `LiveTranslation`
forgets what this returns, and the translation log's compaction drops the rows it marked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Key = tuple[str, str, int]
# The method of the translation log row that says a position is gone: compaction drops the
# position's rows, and readers of the newest row per position never return it.
GONE = "gone"


@dataclass(frozen=True)
class SourceGroups:
    """One full read of the source's committed offsets: each group read and the partitions it
    holds an offset on, and the groups that exist but were not read (their fetch failed, or a
    listing other than the one read names them: Kafka Streams groups on the admin path)."""

    offsets: Mapping[str, frozenset[tuple[str, int]]]
    unread: frozenset[str] = frozenset()
    taken_at: float = 0.0  # monotonic seconds

    def holds(self, key: Key) -> bool:
        group, topic, partition = key
        return group in self.unread or (topic, partition) in self.offsets.get(group, frozenset())


@dataclass
class GonePositions:
    """Positions absent from the source's reads, and since when; `gone` says which have been
    absent for `after_s`."""

    after_s: float
    # position -> when the first read that lacked it was taken (forgotten once it is seen again)
    absent_since: dict[Key, float] = field(default_factory=dict)

    def gone(self, known: Iterable[Key], read: SourceGroups) -> set[Key]:
        """The `known` positions `read` and every read before it since `after_s` lack. What is
        absent is remembered until it is gone or seen again, and nothing else."""
        absent = {key for key in known if not read.holds(key)}
        self.absent_since = {key: self.absent_since.get(key, read.taken_at) for key in absent}
        out = {key for key, since in self.absent_since.items() if read.taken_at - since >= self.after_s}
        for key in out:
            del self.absent_since[key]
        return out


def groups_of(keys: Iterable[Key]) -> list[str]:
    return sorted({group for group, _, _ in keys})
