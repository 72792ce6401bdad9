"""Writing translated offsets to destination groups.

The rule (`decide`, pure): offsets are written only to groups with no members on the
destination (absent, EMPTY or DEAD), so a consumer running there is never overwritten; a
destination offset is never moved backwards unless the operator forces it (`failover
--force`); a dry run writes nothing and says what it would do. Every partition gets an action
that says what happened and why. These are the rules MirrorMaker 2's group offset sync follows,
so operators who know one know the other.

`GroupSync` gathers the groups' states and offsets, applies the rule and writes what it says;
`sync_translations` does that for every group of a set of translations. In a flow (`batched`),
a round of many groups costs one describe, one offset fetch and one commit per coordinator
(`kafka/group_offsets`, the Java admin client in the driver's JVM); the commands, without a
JVM, take the same path through librdkafka (`kafka/group_offsets/consumer_groups.ConsumerGroupOffsets`).
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from dr_stream.core.contracts import sync_metadata
from dr_stream.failure_notes import first_line
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.kafka.group_offsets import INACTIVE_STATES, Fetched, GroupOffsetsClient
from dr_stream.kafka.group_offsets.kafka4 import StreamsGroupStates
from dr_stream.positions.sync_outcome import (
    COMMITTED,
    REWOUND,
    UNCHANGED,
    WOULD_COMMIT,
    WOULD_REWIND,
    Synced,
    SyncOutcome,
    ahead,
    failed,
    held,
    not_translated,
)
from dr_stream.positions.translation_rule import Translation

Partition = tuple[str, int]


@dataclass(frozen=True)
class GroupsRead:
    """Destination groups as a round read them: states, and the committed offsets of the inactive
    ones."""
    states: dict[str, tuple[str, int] | Exception]
    committed: dict[str, Fetched]

    def state(self, group: str) -> tuple[str, int] | Exception:
        return self.states.get(group, TimeoutError(f"group {group}: not described"))

    def joined(self, other: GroupsRead | None) -> GroupsRead:
        if other is None:
            return self
        return GroupsRead({**other.states, **self.states}, {**other.committed, **self.committed})


@dataclass(frozen=True)
class SyncAction:
    group: str
    topic: str
    partition: int
    offset: int
    current: int | None
    action: Synced

    @property
    def outcome(self) -> SyncOutcome | None:
        return self.action.outcome

    @property
    def wrote(self) -> bool:
        return self.action.wrote

    def as_dict(self) -> dict[str, object]:
        """As `--json` carries it: the action as its text."""
        return {"group": self.group, "topic": self.topic, "partition": self.partition, "offset": self.offset,
                "current": self.current, "action": self.action.text}


def decide(group: str, state: str, members: int, current: dict[Partition, int], wanted: dict[Partition, int],
           force: bool = False, dry_run: bool = False) -> list[SyncAction]:
    """What to do with each wanted offset of one group; the actions that `wrote` are the writes."""
    if state not in INACTIVE_STATES:
        left = held(state, members)
        return [SyncAction(group, t, p, o, current.get((t, p)), left) for (t, p), o in sorted(wanted.items())]
    actions = []
    for (topic, partition), offset in sorted(wanted.items()):
        have = current.get((topic, partition))
        rewind = have is not None and have > offset
        if have == offset:
            action = UNCHANGED
        elif have is not None and rewind and not force:
            action = ahead(have)
        elif dry_run:
            action = WOULD_REWIND if rewind else WOULD_COMMIT
        else:
            action = REWOUND if rewind else COMMITTED
        actions.append(SyncAction(group, topic, partition, offset, have, action))
    return actions


class GroupSync:
    """Applies `decide` to destination groups; commits carry `dr-stream:<flow>` as metadata, so the
    flow running the other way can tell them from a consumer's own progress.

    One path for every caller: states, then the offsets of the inactive groups, then `decide`,
    then the commits, each a round over all groups. A flow's round goes through the Java client
    in its JVM (`batched`: one request per coordinator, `kafka/group_offsets`); a command's
    through librdkafka (`kafka/group_offsets/consumer_groups.ConsumerGroupOffsets`: a consumer per group,
    or for many groups the Kafka 4 helper's batched Java client)."""

    def __init__(self, destination: ClusterContext, flow_name: str, timeout_s: float = 15.0,
                 batched: bool = False, origin: str | None = None, offsets: GroupOffsetsClient | None = None,
                 streams: StreamsGroupStates | None = None) -> None:
        self.destination = destination
        # names the flow and the cluster the positions were translated from (`contracts.sync_metadata`)
        self.metadata = sync_metadata(flow_name, origin)
        # how long one group's state, read and write may wait out a moving coordinator
        self.timeout_s = timeout_s
        self.batched = batched
        # the groups' client; None: built at first use (`batched`: the Java client, else librdkafka)
        # and closed by `close`. Given (a command's cluster context, `kafka.cluster_context`; groups
        # of another kind, `kafka4.ShareGroupOffsets`): its giver's to close.
        self._offsets: GroupOffsetsClient | None = offsets
        self._given = offsets is not None
        # the destination's Kafka Streams groups, which the consumer-group describe takes for absent
        self.streams = streams
        self._reader: ThreadPoolExecutor | None = None

    def close(self) -> None:
        """Closes the client a sync opened and the reading thread."""
        if self._reader is not None:
            self._reader.shutdown(wait=True)
            self._reader = None
        if self._offsets is not None and not self._given:
            self._offsets.close()
            self._offsets = None

    def _groups(self) -> GroupOffsetsClient:
        if self._offsets is None:
            self._offsets = self.destination.groups_client(self.timeout_s, self.batched)
        return self._offsets

    def states(self, groups: Iterable[str]) -> dict[str, tuple[str, int] | Exception]:
        """The groups' states on the destination. Batched, the Java client's describe: librdkafka's
        of 1,500 groups took 0.57-1.02 s a round, the Java client's 0.12-0.27 s."""
        groups = sorted(set(groups))
        return self._with_streams(self._groups().states(groups)) if groups else {}

    def _with_streams(self, found: dict[str, tuple[str, int] | Exception]) -> dict[str, tuple[str, int] | Exception]:
        """A Kafka Streams group is absent to the consumer-group describe, members or not: with
        `streams`, the groups it calls absent are described again as Streams groups (one request),
        so a Streams application running on the destination is skipped like a consumer group."""
        unknown = [g for g, s in found.items() if s == ("ABSENT", 0)]
        if self.streams is None or not unknown:
            return found
        try:
            return {**found, **self.streams.states(unknown)}
        except Exception as exc:  # not known whether they run there: none of them is written
            return {**found, **dict.fromkeys(unknown, exc)}

    def apply(self, group: str, wanted: dict[Partition, int], force: bool = False,
              dry_run: bool = False) -> list[SyncAction]:
        """`apply_many` for one group; its failure is raised."""
        found = self.apply_many({group: wanted}, force, dry_run)[group]
        if isinstance(found, Exception):
            raise found
        return found

    def read(self, groups: Iterable[str], partitions: Iterable[Partition] | None = None) -> GroupsRead:
        """What `decide` needs from the destination about `groups`: their states and the committed
        offsets of the inactive ones. Without a JVM, offsets only when `partitions` names where to
        read them (librdkafka reads a group's offsets for named partitions), else only the states."""
        if not self.batched and partitions is None:
            return GroupsRead(self.states(groups), {})
        groups = sorted(set(groups))
        if partitions is None:
            states = self.states(groups)
            return GroupsRead(states, self._groups().committed(_inactive(states)))
        # Partitions named (a command's read ahead): every group's offsets are read while the
        # states are, and those of the inactive groups kept; reading a running group's is harmless.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="group-offsets-read") as pool:
            offsets = pool.submit(self._groups().committed, groups, partitions)
            states = self.states(groups)
            committed = offsets.result()
        inactive = set(_inactive(states))
        return GroupsRead(states, {g: found for g, found in committed.items() if g in inactive})

    def read_ahead(self, groups: Iterable[str], partitions: Iterable[Partition] | None = None) -> Future[GroupsRead]:
        """`read` on a thread of this sync's own, so a caller can translate meanwhile: a flow's
        round of 15,000 positions spends about as long translating as reading (both about a
        second under load). Reading before deciding is as safe as it was right before: the broker
        refuses a commit to a group that gained members since, and no one else commits for a
        group that has none."""
        if self._reader is None:
            self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="group-read")
        return self._reader.submit(self.read, sorted(set(groups)),
                                   None if partitions is None else sorted(set(partitions)))

    def apply_many(self, wanted: dict[str, dict[Partition, int]], force: bool = False,
                   dry_run: bool = False, seen: GroupsRead | None = None) -> dict[str, list[SyncAction] | Exception]:
        """`decide` and the writes for many groups, each step a round over all of them. `seen`:
        what a `read` found already (what it lacks is read here)."""
        seen = self._complete(wanted, seen)
        out: dict[str, list[SyncAction] | Exception] = {}
        writes: dict[str, dict[Partition, int]] = {}
        for group, offsets in wanted.items():
            state = seen.state(group)
            if isinstance(state, Exception):
                out[group] = state
            elif state[0] not in INACTIVE_STATES:
                out[group] = decide(group, *state, {}, offsets, force, dry_run)
            elif isinstance(found := seen.committed.get(group, TimeoutError(f"group {group}: offsets not read")),
                            Exception):
                out[group] = found
            else:
                current = {k: c.offset for k, c in found.items()}
                actions = decide(group, *state, current, offsets, force, dry_run)
                out[group] = actions
                writes[group] = {(a.topic, a.partition): a.offset for a in actions if a.wrote}
        # The broker refuses a commit to a group that gained members since its describe: the group
        # then fails this round with that reason, and no consumer of it is overwritten.
        out.update(self._groups().commit({g: w for g, w in writes.items() if w}, self.metadata))
        return out

    def _complete(self, wanted: dict[str, dict[Partition, int]], seen: GroupsRead | None) -> GroupsRead:
        """`seen` with the states of the groups it lacks and the offsets of the inactive ones."""
        missing = [g for g in wanted if seen is None or g not in seen.states]
        if missing or seen is None:
            seen = GroupsRead(self.states(missing), {}).joined(seen)
        unread = [g for g in _inactive({g: seen.state(g) for g in wanted}) if g not in seen.committed]
        if unread:
            partitions = sorted({p for g in unread for p in wanted[g]})
            seen = GroupsRead({}, self._groups().committed(unread, partitions)).joined(seen)
        return seen


def _inactive(states: dict[str, tuple[str, int] | Exception]) -> list[str]:
    return sorted(g for g, s in states.items() if not isinstance(s, Exception) and s[0] in INACTIVE_STATES)


def sync_translations(sync: GroupSync, translations: Iterable[Translation], force: bool = False,
                      dry_run: bool = False, seen: Future[GroupsRead] | None = None
                      ) -> dict[tuple[str, str, int], Synced]:
    """Each translation's key -> the action taken for it. A group whose sync fails gets
    `failed: <reason>` on each of its partitions and does not stop the others; a round that
    fails as a whole (its `read_ahead` too) fails each of its groups that way."""
    by_group: dict[str, list[Translation]] = {}
    actions: dict[tuple[str, str, int], Synced] = {}
    for t in translations:
        if t.offset is None:
            actions[t.key] = not_translated(t.note)
        else:
            by_group.setdefault(t.group, []).append(t)
    wanted = {group: {(t.dest_topic, t.dest_partition): t.offset for t in items if t.offset is not None}
              for group, items in sorted(by_group.items())}
    try:
        results = sync.apply_many(wanted, force, dry_run, seen.result() if seen else None) if wanted else {}
    except Exception as exc:  # e.g. the group states could not be described: every group failed
        results = dict.fromkeys(wanted, exc)
    for group, items in by_group.items():
        result = results[group]
        if isinstance(result, Exception):
            done = dict.fromkeys(wanted[group], failed(first_line(result)))
        else:
            done = {(a.topic, a.partition): a.action for a in result}
        for t in items:
            actions[t.key] = done[(t.dest_topic, t.dest_partition)]
    return actions
