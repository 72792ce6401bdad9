"""Writing translated offsets to destination groups.

The rule (`decide`, pure): offsets are written only to groups with no members on the
destination (absent, EMPTY or DEAD), so a consumer running there is never overwritten; a
destination offset is never moved backwards unless the operator forces it (`failover
--force`); a dry run writes nothing and says what it would do. Every partition gets an action
that says what happened and why. These are the rules MirrorMaker 2's group offset sync follows,
so operators who know one know the other.

`GroupSync` gathers a group's state and offsets, applies the rule and writes what it says;
`sync_translations` does that for every group of a set of translations. In a flow (`batched`),
a round of many groups costs one describe, one offset fetch and one commit per coordinator
(`kafka/group_offsets`, the Java admin client in the driver's JVM); the commands, without a
JVM, go through a consumer per group, `PARALLEL` at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from dr_stream.core.config import ClusterConfig
from dr_stream.core.contracts import SYNC_METADATA_PREFIX
from dr_stream.failure_notes import first_line
from dr_stream.kafka import clients
from dr_stream.kafka.clients import consuming
from dr_stream.kafka.group_offsets import Fetched, GroupOffsets
from dr_stream.kafka.groups import INACTIVE_STATES, group_states, read_committed, write_committed
from dr_stream.positions.translation_rule import Translation

WRITES = frozenset({"committed", "rewound (--force)"})
# Groups synced at once: each costs a few round trips to its coordinator, mostly waiting.
PARALLEL = 16

Partition = tuple[str, int]


@dataclass(frozen=True)
class GroupsRead:
    """Destination groups as a round read them: states, and the committed offsets of the inactive
    ones (batched sync only; the unbatched one reads them in each group's own consumer)."""
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
    action: str

    @property
    def wrote(self) -> bool:
        return self.action in WRITES


def decide(group: str, state: str, members: int, current: dict[Partition, int], wanted: dict[Partition, int],
           force: bool = False, dry_run: bool = False) -> list[SyncAction]:
    """What to do with each wanted offset of one group; the actions that `wrote` are the writes."""
    if state not in INACTIVE_STATES:
        reason = f"skipped: group is {state} on the destination ({members} members)"
        return [SyncAction(group, t, p, o, current.get((t, p)), reason) for (t, p), o in sorted(wanted.items())]
    actions = []
    for (topic, partition), offset in sorted(wanted.items()):
        have = current.get((topic, partition))
        rewind = have is not None and have > offset
        if have == offset:
            action = "unchanged"
        elif rewind and not force:
            action = f"skipped: destination is ahead at {have}; not rewound (--force rewinds)"
        elif dry_run:
            action = "would rewind (--force)" if rewind else "would commit"
        else:
            action = "rewound (--force)" if rewind else "committed"
        actions.append(SyncAction(group, topic, partition, offset, have, action))
    return actions


class GroupSync:
    """Applies `decide` to destination groups; commits carry `dr-stream:<flow>` as metadata, so the
    flow running the other way can tell them from a consumer's own progress."""

    def __init__(self, destination: ClusterConfig, flow_name: str, timeout_s: float = 15.0,
                 batched: bool = False) -> None:
        self.destination = destination
        self.metadata = f"{SYNC_METADATA_PREFIX}{flow_name}"
        # how long one group's state, read and write may wait out a moving coordinator
        self.timeout_s = timeout_s
        self.batched = batched
        self._client: AdminClient | None = None
        self._offsets: GroupOffsets | None = None
        self._reader: ThreadPoolExecutor | None = None

    def close(self) -> None:
        """Closes the Java client a batched sync opened and the reading thread (the admin client
        goes with the object)."""
        if self._reader is not None:
            self._reader.shutdown(wait=True)
            self._reader = None
        if self._offsets is not None:
            self._offsets.close()
            self._offsets = None

    def _java(self) -> GroupOffsets:
        if self._offsets is None:
            self._offsets = clients.group_offsets(self.destination, self.timeout_s)
        return self._offsets

    @property
    def admin(self) -> AdminClient:
        if self._client is None:
            self._client = clients.admin(self.destination)
        return self._client

    def states(self, groups: Iterable[str]) -> dict[str, tuple[str, int] | Exception]:
        """The groups' states on the destination: batched, through the Java client (one request
        per coordinator; librdkafka's describe of 1,500 groups took 0.57-1.02 s a round, the Java
        client's 0.12-0.27 s); else `group_states`, whose admin client is dropped for a new one
        once a describe timed out: librdkafka (2.16) keeps that request's coordinator lookup alive,
        and when the connection comes back it completes a request already freed and aborts the
        whole process (librdkafka issue 4605); destroying the client ends the lookup safely."""
        if self.batched:
            return self._java().states(sorted(set(groups)))
        found = group_states(self.admin, groups, self.timeout_s)
        if any(isinstance(v, TimeoutError) for v in found.values()):
            self._client = None
        return found

    def apply(self, group: str, wanted: dict[Partition, int], force: bool = False,
              dry_run: bool = False, state: tuple[str, int] | None = None) -> list[SyncAction]:
        """`decide` for one group, then its writes; `state` when the caller described it already."""
        if state is None:
            found = self.states([group])[group]
            if isinstance(found, Exception):
                raise found
            state = found
        state, members = state
        if state not in INACTIVE_STATES:
            return decide(group, state, members, {}, wanted, force, dry_run)
        with consuming(self.destination, group) as consumer:
            current = {k: c.offset for k, c in
                       read_committed(consumer, self.destination, group, wanted, self.timeout_s).items()}
            actions = decide(group, state, members, current, wanted, force, dry_run)
            writes = {(a.topic, a.partition): a.offset for a in actions if a.wrote}
            if writes:
                write_committed(consumer, self.destination, group, writes, self.metadata, self.timeout_s)
        return actions

    def read(self, groups: Iterable[str]) -> GroupsRead:
        """What `decide` needs from the destination about `groups`: their states and (batched) the
        committed offsets of the inactive ones."""
        states = self.states(groups)
        if not self.batched:
            return GroupsRead(states, {})
        inactive = [g for g, s in states.items() if not isinstance(s, Exception) and s[0] in INACTIVE_STATES]
        return GroupsRead(states, self._java().committed(inactive))

    def read_ahead(self, groups: Iterable[str]) -> Future[GroupsRead]:
        """`read` on a thread of this sync's own, so a caller can translate meanwhile: a flow's
        round of 15,000 positions spends about as long translating as reading (both about a
        second under load). Reading before deciding is as safe as it was right before: the broker
        refuses a commit to a group that gained members since, and no one else commits for a
        group that has none."""
        if self._reader is None:
            self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="group-read")
        return self._reader.submit(self.read, sorted(set(groups)))

    def apply_many(self, wanted: dict[str, dict[Partition, int]], force: bool = False,
                   dry_run: bool = False, seen: GroupsRead | None = None) -> dict[str, list[SyncAction] | Exception]:
        """`apply` for many groups: their states in one request; their offsets read and written in
        one batch per coordinator (`batched`), else `PARALLEL` groups at a time, each through a
        consumer of its own group. `seen`: what a `read` found already (groups it lacks are read)."""
        missing = [g for g in wanted if seen is None or g not in seen.states]
        if missing:
            seen = self.read(missing).joined(seen)
        if self.batched:
            return self._apply_batched(seen, wanted, force, dry_run)

        def one(group: str) -> list[SyncAction] | Exception:
            try:
                state = seen.state(group)
                if isinstance(state, Exception):
                    raise state
                return self.apply(group, wanted[group], force, dry_run, state)
            except Exception as exc:  # e.g. the group became active between the check and the write
                return exc

        if len(wanted) == 1:
            return {g: one(g) for g in wanted}
        with ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="group-sync") as pool:
            return dict(zip(wanted, pool.map(one, wanted), strict=True))

    def _apply_batched(self, seen: GroupsRead, wanted: dict[str, dict[Partition, int]],
                       force: bool, dry_run: bool) -> dict[str, list[SyncAction] | Exception]:
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
                out[group] = decide(group, *state, current, offsets, force, dry_run)
                writes[group] = {(a.topic, a.partition): a.offset for a in out[group] if a.wrote}
        # The broker refuses a commit to a group that gained members since its describe: the group
        # then fails this round with that reason, and no consumer of it is overwritten.
        out.update(self._java().commit({g: w for g, w in writes.items() if w}, self.metadata))
        return out


def sync_translations(sync: GroupSync, translations: Iterable[Translation], force: bool = False,
                      dry_run: bool = False, seen: Future[GroupsRead] | None = None
                      ) -> dict[tuple[str, str, int], str]:
    """Each translation's key -> the action taken for it. A group whose sync fails gets
    `failed: <reason>` on each of its partitions and does not stop the others; a round that
    fails as a whole (its `read_ahead` too) fails each of its groups that way."""
    by_group: dict[str, list[Translation]] = {}
    actions: dict[tuple[str, str, int], str] = {}
    for t in translations:
        if t.offset is None:
            actions[t.key] = f"skipped: not translated ({t.note})"
        else:
            by_group.setdefault(t.group, []).append(t)
    wanted = {group: {(t.dest_topic, t.dest_partition): t.offset for t in items}
              for group, items in sorted(by_group.items())}
    try:
        results = sync.apply_many(wanted, force, dry_run, seen.result() if seen else None) if wanted else {}
    except Exception as exc:  # e.g. the group states could not be described: every group failed
        results = dict.fromkeys(wanted, exc)
    for group, items in by_group.items():
        result = results[group]
        if isinstance(result, Exception):
            done = dict.fromkeys(wanted[group], f"failed: {first_line(result)}")
        else:
            done = {(a.topic, a.partition): a.action for a in result}
        for t in items:
            actions[t.key] = done[(t.dest_topic, t.dest_partition)]
    return actions
