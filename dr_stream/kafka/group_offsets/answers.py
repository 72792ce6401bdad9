"""What group-offset calls answer, whichever client stack served them: a group's committed
offsets (`Committed`), a fetch's result (`Fetched`: the offsets or why there are none), a group's
state as dr-stream names it, and the tab-separated lines the JVM helpers answer in (the Java
admin in the flow's driver, `java_admin`; the Kafka 4 helper, `kafka4`), parsed here.

Pure: no client, no I/O; unit-tested against the lines the helpers write.

Invariant: a group whose fetch or commit failed maps to its error, never to "no offsets".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dr_stream.core.contracts import synced_from

Partition = tuple[str, int]
# Offsets dr-stream commits carry this metadata, so the flow running the other way can tell a
# translated position from a consumer's own progress and never echoes it back.


@dataclass(frozen=True)
class Committed:
    offset: int
    metadata: str = ""

    @property
    def written_by_dr_stream(self) -> bool:
        return synced_from(self.metadata) is not None

    def taken_by(self, forward_except: str | None) -> bool:
        """Whether a flow takes this position to translate. A consumer's own commit, always. One
        dr-stream synced here, only where the flow forwards (`forward_except` is its
        destination's cluster.id, else None) and it came from elsewhere than that destination,
        as far as its metadata says: a chain hop passes it on, a position never goes back to the
        cluster it came from."""
        origin = synced_from(self.metadata)
        return origin is None or (forward_except is not None and origin not in ("", forward_except))


# What one group's fetch gave: its offsets, or why there are none.
Fetched = dict[Partition, Committed] | Exception


class GroupOffsetsError(RuntimeError):
    """A group's fetch or commit failed; the message is the Java client's."""


def lines(text: str) -> list[list[str]]:
    """A helper's answer, one list of tab-separated fields per line."""
    return [line.split("\t") for line in text.splitlines()]


def parse_committed(text: str, groups: list[str]) -> dict[str, Fetched]:
    """`GroupOffsets.committed`'s lines -> per asked group, its offsets or its error (a group
    with no committed offsets maps to an empty dict)."""
    return committed_of(lines(text), groups)


def committed_of(rows: Iterable[list[str]], groups: Iterable[str]) -> dict[str, Fetched]:
    """`parse_committed` over lines already split: `group topic partition offset metadata`, or
    `group ! error`."""
    out: dict[str, Fetched] = {g: {} for g in groups}
    for fields in rows:
        group = fields[0]
        if len(fields) == 3 and fields[1] == "!":
            out[group] = GroupOffsetsError(fields[2])
        elif len(fields) == 5:
            committed = out.setdefault(group, {})
            if not isinstance(committed, Exception):
                committed[(fields[1], int(fields[2]))] = Committed(int(fields[3]), fields[4])
    return out


def group_state(state: str, members: int) -> tuple[str, int]:
    """(state, member count) as dr-stream names it: a coordinator describes a group it does not
    know as DEAD with no members, which is a group that is absent."""
    return ("ABSENT", 0) if state == "DEAD" and not members else (state, members)


def parse_states(text: str, groups: list[str]) -> dict[str, tuple[str, int] | Exception]:
    """`GroupOffsets.states`'s lines -> per asked group, its (state, members) or the error that
    kept it from being described (a group not answered for at all maps to an error too)."""
    return states_of(lines(text), groups)


def states_of(rows: Iterable[list[str]], groups: Iterable[str]) -> dict[str, tuple[str, int] | Exception]:
    """`parse_states` over lines already split: `group state members`, or `group ! error`."""
    out: dict[str, tuple[str, int] | Exception] = {
        g: GroupOffsetsError(f"group {g}: not described") for g in groups}
    for fields in rows:
        if len(fields) != 3:
            continue
        group, state, members = fields
        if state != "!":
            out[group] = group_state(state, int(members))
        elif "GroupIdNotFoundException" in members:
            out[group] = ("ABSENT", 0)
        else:
            out[group] = GroupOffsetsError(members)
    return out


def commit_lines(offsets: Mapping[str, Mapping[Partition, int]]) -> str:
    """{group: {(topic, partition): offset}} -> the lines `GroupOffsets.commit` takes."""
    return "".join(f"{group}\t{topic}\t{partition}\t{offset}\n" for group, wanted in sorted(offsets.items())
                   for (topic, partition), offset in sorted(wanted.items()))


# A group in one of these states has no members: offsets can be written without clobbering anyone.
INACTIVE_STATES = frozenset({"EMPTY", "DEAD", "ABSENT"})
