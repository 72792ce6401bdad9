"""Offset translation: a group's source position -> the same position on the destination.

For a group committed at C on source partition P (C = next record to read):
- `exact`: the destination offset of the first record this flow copied with origin offset >= C;
- `next`: nothing at or after C was copied yet: the destination offset just after the last
  record copied from P (the consumer resumes with what arrives next). While the flow runs,
  only once it has handled every record before C and the index holds their runs; until then
  the position is `waiting` and nothing is synced, since a record before C still on its way
  would land after that offset and be read again after a failover;
- `returned`: the source record at C is itself a copy of a destination record (after a
  failover, the cluster coming back is the destination): that original's offset. At the end of
  the source log, just after the original of the last such copy, unless `next` is further on;
- `timestamp`: the index has nothing for P: the earliest destination offset whose timestamp is
  >= the timestamp of the last record the group consumed;
- `window`: C lies in the part of the index kept as spans, and the destination records read
  back where its copy must be held none of ours: the first offset the copy could be at, so
  nothing is skipped (`index.spans`);
- `none`: not translatable (no index and no timestamp, or no destination partition).
Then every offset is clamped to the destination's [log start, log end], and a clamp is
reported in `note`.

Everything here is a rule over plain values; `run_store` finds where C lands in the index
runs and `translator` gathers the inputs from Kafka and the index.

Invariant: an `exact` translation never lands after the first copied record the group has
not consumed, and never before a copied record it has consumed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from dr_stream.core.contracts import UNKNOWN_TIMESTAMP
from dr_stream.core.lag import records_behind


@dataclass(frozen=True, kw_only=True)
class Translation:
    group: str
    topic: str
    partition: int
    source_offset: int
    source_timestamp: int
    dest_topic: str
    dest_partition: int
    offset: int | None
    method: str
    note: str
    clamped: bool
    log_start: int | None
    log_end: int | None
    last_copied: int | None
    source_log_end: int | None
    translated_at: int

    @property
    def key(self) -> tuple[str, str, int]:
        return self.group, self.topic, self.partition

    @property
    def unreplicated(self) -> int | None:
        """Records on the source partition never copied (lost to RPO if the source is gone)."""
        if self.source_log_end is None:
            return None
        return records_behind(0, self.source_log_end, None if self.last_copied is None else self.last_copied + 1)


_FIELDS = frozenset(f.name for f in fields(Translation))


def evolve(t: Translation, **changes: object) -> Translation:
    """`t` with `changes`: `dataclasses.replace` without its round trip through `__init__`, which
    took a third of a failover's time at 10,000 positions (every field is a plain value)."""
    unknown = changes.keys() - _FIELDS
    if unknown:
        raise TypeError(f"Translation has no field {', '.join(sorted(unknown))}")
    new = object.__new__(Translation)
    new.__dict__.update(t.__dict__)
    new.__dict__.update(changes)
    return new


def clamp(offset: int, log_start: int, log_end: int) -> tuple[int, str]:
    """The offset within [log_start, log_end], with a note when it had to move."""
    if offset < log_start:
        return log_start, f"clamped {offset} -> {log_start} (destination log start)"
    if offset > log_end:
        return log_end, f"clamped {offset} -> {log_end} (destination log end)"
    return offset, ""


def returned_look_ups(t: Translation) -> tuple[int, ...]:
    """The source offsets `through_returned` asks `original_at` about for `t`."""
    return (t.source_offset,) if t.method in ("exact", "waiting") else (t.source_offset, t.source_offset - 1)


def through_returned(t: Translation, original_at: Callable[[int], int | None]) -> Translation:
    """Applies `returned`. `original_at(o)` is the destination offset of the original of the first
    source record at or after o, when that record is a returned copy, else None."""
    original = original_at(t.source_offset)
    if original is not None:
        return evolve(t, offset=original, method="returned")
    if t.method in ("exact", "waiting"):
        return t
    # Nothing at or after C maps over yet: resume after the last original the group read.
    before = original_at(t.source_offset - 1)
    if before is not None and (t.method != "next" or t.offset is None or before + 1 > t.offset):
        return evolve(t, offset=before + 1, method="returned")
    return t


def needs_timestamp(t: Translation, bounds: tuple[int, int] | None) -> bool:
    """Whether `settle` will use the destination offset for the commit's timestamp."""
    return bounds is not None and t.method == "timestamp" and t.source_timestamp != UNKNOWN_TIMESTAMP


def settle(t: Translation, bounds: tuple[int, int] | None, by_timestamp: int | None = None) -> Translation:
    """The final translation against the destination partition's (log start, log end).

    `by_timestamp` is the first destination offset whose timestamp is >= the commit's, None when
    every record is older (then the log end); it is used only where `needs_timestamp`.
    """
    if bounds is None:
        missing = f"destination partition {t.dest_topic}[{t.dest_partition}] does not exist"
        return evolve(t, offset=None, method="none", note=missing)
    log_start, log_end = bounds
    t = evolve(t, log_start=log_start, log_end=log_end)
    if t.method == "waiting":
        return evolve(t, note=f"waiting: records before source offset {t.source_offset} are still being copied "
                               "or indexed; nothing is synced until they are")
    notes = [t.note] if t.note else []  # what placing it said (a span window's fallback)
    if t.method == "timestamp":
        if t.source_timestamp == UNKNOWN_TIMESTAMP:
            return evolve(t, offset=None, method="none",
                           note="offset index has nothing for this partition and the commit has no timestamp")
        t = evolve(t, offset=log_end if by_timestamp is None else by_timestamp)
        notes.append(f"fallback: offset index has nothing for this partition; by timestamp {t.source_timestamp}")
    if t.offset is None:  # nothing to clamp (no method that reaches here leaves it unset)
        return t
    offset, clamp_note = clamp(t.offset, log_start, log_end)
    if clamp_note:
        notes.append(clamp_note)
    return evolve(t, offset=offset, clamped=bool(clamp_note), note="; ".join(notes))
