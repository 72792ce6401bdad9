"""Commit backing: a position read from `__consumer_timestamps` counts only once the source's
own committed offsets back it.

That topic is written by every application's client helper, so anyone with WRITE on it can
write a record for any group at any offset. A record taken as it is would move the group's
position on the destination, and positions there never move back: a failover would skip what
lies between. The source's committed offsets are the truth the records stand for, and the
flow's poller reads them each round. So a position read from the topic is *backed* once a
commit of its group, as the poller read it, reached at least its offset: the record then says
nothing the source did not. (A record at or below what the group committed moves the
destination nowhere it would not go anyway.)

A genuine helper's record usually reaches the translate query before the poller's next round
has read the commit it stands for: an unbacked position is held, newest per group and
partition, and released as soon as a commit reaches it. One still held `grace_s` after both it
arrived and the poller first read the source in full (`source_read`: a poller catching up on a
long `__consumer_offsets` has not seen every commit yet) is said once (`overdue`): a forged
record, or a group the poller may not read. What is held is bounded by what is live: a position
whose group held no committed offset on its partition in a full read of the source taken
`grace_s` after it was held is dropped (`not_live`; its group will write a new record, and the
poller offers the commit itself, when it commits there), and any held for `expire_s` is dropped
(`expired`). Both are counted, so a flood of records for groups that never commit costs nothing
lasting.

Invariant: a position leaves the hold only as backed (`released`) or dropped (`not_live`, `expired`);
what the flow's own state recorded (the translation log, read back at a restart) and what the
poller itself read count as commits. Thread-safe: the poller's thread reports commits while the
translate query's batch and the step thread take positions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from dr_stream.positions.consumer_timestamps import GroupCommit
from dr_stream.positions.gone_positions import SourceGroups

Key = tuple[str, str, int]


@dataclass
class CommitBacking:
    # how long a commit may take to reach the poller's read after its group's record was read
    grace_s: float = 30.0
    # how long an unbacked position is held at most
    expire_s: float = 3600.0
    clock: Callable[[], float] = time.monotonic
    # the highest offset a source commit showed, per group and partition
    _highest: dict[Key, int] = field(default_factory=dict)
    # the newest unbacked position per key, and when a position of that key was first held
    _held: dict[Key, tuple[GroupCommit, float]] = field(default_factory=dict)
    _said: set[Key] = field(default_factory=set)
    _read_at: float | None = None  # when the poller's first full read of the source came
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def source_read(self) -> None:
        """The poller read every selected group's committed offsets once (it has seen them all)."""
        with self._lock:
            if self._read_at is None:
                self._read_at = self.clock()

    def committed(self, commits: Iterable[GroupCommit]) -> None:
        """Offsets the source showed committed (the poller's read, the flow's own record)."""
        with self._lock:
            for c in commits:
                if c.offset > self._highest.get(c.key, -1):
                    self._highest[c.key] = c.offset

    def backed(self, positions: Iterable[GroupCommit]) -> list[GroupCommit]:
        """The positions a commit backs; the others are held in place of any older one of their key
        (a backed position replaces a held one too: the topic's order says it is newer)."""
        now = self.clock()
        out = []
        with self._lock:
            for p in positions:
                if p.offset <= self._highest.get(p.key, -1):
                    out.append(p)
                    self._held.pop(p.key, None)
                    self._said.discard(p.key)
                else:
                    since = self._held[p.key][1] if p.key in self._held else now
                    self._held[p.key] = (p, since)
        return out

    def released(self) -> list[GroupCommit]:
        """Held positions a commit reached since, now out of the hold."""
        with self._lock:
            out = [p for p, _ in self._held.values() if p.offset <= self._highest.get(p.key, -1)]
            for p in out:
                del self._held[p.key]
                self._said.discard(p.key)
        return out

    def overdue(self) -> list[tuple[GroupCommit, int | None]]:
        """Positions held past `grace_s` not said before, each with the highest commit the source
        showed for its key (None: none)."""
        now = self.clock()
        with self._lock:
            if self._read_at is None:
                return []
            due = [(p, self._highest.get(key)) for key, (p, since) in sorted(self._held.items())
                   if now - max(since, self._read_at) >= self.grace_s and key not in self._said]
            self._said.update(p.key for p, _ in due)
        return due

    def not_live(self, read: SourceGroups) -> int:
        """Drops the positions held `grace_s` before `read` was taken whose group it found no
        committed offset for on their partition; returns how many."""
        with self._lock:
            dead = [key for key, (_, since) in self._held.items()
                    if read.taken_at - since >= self.grace_s and not read.holds(key)]
            for key in dead:
                del self._held[key]
                self._said.discard(key)
        return len(dead)

    def expired(self) -> int:
        """Drops positions held for `expire_s`; returns how many."""
        now = self.clock()
        with self._lock:
            old = [key for key, (_, since) in self._held.items() if now - since >= self.expire_s]
            for key in old:
                del self._held[key]
                self._said.discard(key)
        return len(old)

    def forget(self, keys: Iterable[Key]) -> None:
        """Positions gone from the source: nothing of them is kept."""
        with self._lock:
            for key in keys:
                self._highest.pop(key, None)
                self._held.pop(key, None)
                self._said.discard(key)

    @property
    def holding(self) -> int:
        with self._lock:
            return len(self._held)
