"""The second writer of `__consumer_timestamps`: dr-stream itself, from committed offsets.

Unmodified consumers (any language, no helper) commit offsets to the source cluster as
usual; this poller reads them each round, looks up the timestamp of the last record each
group consumed, and reports the positions that changed.

Positions come from `__consumer_offsets` itself by default (a round reads the commits made
since the last one, so its cost follows the commit rate, not the group count), or from the
group coordinators through the admin API (`offsets.positions_from: admin`; see
`committed_positions`). A principal refused READ on `__consumer_offsets` falls back to the
admin path, said in one line. A timestamp is looked up only for positions that moved, all of a
round's in one pass. Rounds never overlap and never come closer than the last one took
(`LoopPace`); each round's duration, group count and period go to `on_round`. The commands
(status, failover) run without a JVM and read the same offsets through librdkafka
(`group_commits`).

A position dr-stream itself committed (metadata `dr-stream:<flow>@<cluster.id>`) is taken
only by a flow that forwards (`provenance.forward`, a hop of a chain) and only when it came
from elsewhere than that flow's destination; it is handed to the flow's own translation, never
written to the shared topic, where the flow running back to its origin would read it.

Every `gone_check_s` a round reads every group in full and tells the flow what the source
holds (`on_source_groups`, `gone_positions`), unless the read is no evidence of it (a reader
still catching up); what the poller reported of positions the source no longer holds is
dropped then, so its memory follows the groups that exist.

Invariants: only groups the flow translates and topics it replicates are reported; a position
never goes back to the cluster it was translated from, so two flows can not echo a
translation back and forth; a group whose offsets could not be read is reported, never taken
as having none (nor as gone).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from dr_stream.core.contracts import CONSUMER_TIMESTAMPS_TOPIC
from dr_stream.core.policy import GroupFilter, TopicFilter
from dr_stream.failure_notes import FailureNotes, first_line
from dr_stream.kafka.admin import matching_partitions
from dr_stream.kafka.authorization import NotAuthorized
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.kafka.group_offsets import Fetched, GroupOffsetsClient
from dr_stream.kafka.group_offsets.consumer_groups import list_groups
from dr_stream.loop_pace import LoopPace
from dr_stream.positions.committed_positions import AdminPositions, CommittedPositions, TopicPositions
from dr_stream.positions.consumer_timestamps import GroupCommit, RecordTimestamps, report, report_gone
from dr_stream.positions.gone_positions import SourceGroups


def group_commits(offsets: GroupOffsetsClient, admin: AdminClient, groups: GroupFilter, topics: TopicFilter,
                  group_pattern: str | None = None, forward_except: str | None = None,
                  more_groups: Iterable[str] = ()) -> dict[str, list[GroupCommit] | Exception]:
    """Each selected group's committed positions on the replicated topics that the flow takes
    (`Committed.taken_by`: the consumers' own, and with `forward_except` those dr-stream synced
    from elsewhere; timestamps not looked up), or the error that kept them from being read: one
    group whose coordinator is moving does not hide the others. `more_groups`: groups the
    consumer-group listing leaves out (Kafka Streams groups, `kafka4.streams_groups_on`).
    `offsets` and `admin` are the source's (a command's `cluster_context`: a drill that asks
    twice starts one helper for many groups, not two)."""
    selected = [g for g in sorted(set(list_groups(admin)) | set(more_groups))
                if groups.matches(g) and not (group_pattern and not re.fullmatch(group_pattern, g))]
    if not selected:
        return {}
    offsets.expect(len(selected))  # a helper for many groups starts while the partitions are listed
    fetched = offsets.committed(selected, matching_partitions(admin, topics))
    return {group: found if isinstance(found, Exception) else
            [GroupCommit(group, topic, partition, committed.offset)
             for (topic, partition), committed in found.items() if committed.taken_by(forward_except)]
            for group, found in fetched.items()}


def current_commits(offsets: GroupOffsetsClient, admin: AdminClient, groups: GroupFilter, topics: TopicFilter,
                    group_pattern: str | None = None, forward_except: str | None = None,
                    more_groups: Iterable[str] = ()) -> list[GroupCommit]:
    """`group_commits`, all of them or the first group's error (a command reports it and stops)."""
    out = []
    for found in group_commits(offsets, admin, groups, topics, group_pattern, forward_except, more_groups).values():
        if isinstance(found, Exception):
            raise found
        out.extend(found)
    return out


def stamped(commits: list[GroupCommit], timestamps: RecordTimestamps) -> list[GroupCommit]:
    """The commits with the timestamp of the last record each group consumed, looked up together."""
    looked_up = timestamps.before_each({(c.topic, c.partition, c.offset) for c in commits})
    return [GroupCommit(c.group, c.topic, c.partition, c.offset, looked_up[(c.topic, c.partition, c.offset)])
            for c in commits]


def moved_commits(fetched: dict[str, Fetched], topics: TopicFilter, reported: dict[tuple[str, str, int], int],
                  forward_except: str | None = None) -> tuple[list[GroupCommit], dict[str, Exception]]:
    """One round's fetch -> the positions on replicated topics the flow takes (`group_commits`)
    that differ from what was last reported, and the groups whose fetch failed."""
    moved, failed = [], {}
    for group, result in sorted(fetched.items()):
        if isinstance(result, Exception):
            failed[group] = result
            continue
        for (topic, partition), committed in sorted(result.items()):
            if topics.matches(topic) and committed.taken_by(forward_except) \
                    and reported.get((group, topic, partition)) != committed.offset:
                moved.append(GroupCommit(group, topic, partition, committed.offset))
    return moved, failed


def _synced_here(fetched: dict[str, Fetched]) -> set[tuple[str, str, int]]:
    return {(group, topic, partition) for group, found in fetched.items() if not isinstance(found, Exception)
            for (topic, partition), committed in found.items() if committed.written_by_dr_stream}


@dataclass
class CommittedOffsetPoller:
    source: ClusterContext
    groups: GroupFilter
    topics: TopicFilter
    # Half a second between rounds: the poll is most of the delay from a commit on the source to
    # the destination group (goal: 2 s), and a round costs a few requests at any group count.
    interval_s: float = 0.5
    log: Callable[[str], None] = print
    # `__consumer_offsets` or `admin` (OffsetsConfig.positions_from)
    positions_from: str = "__consumer_offsets"
    # told each round's duration in seconds, the groups it read, and the period its pace set
    on_round: Callable[[float, int, float], None] = lambda seconds, groups, period_s: None
    # told each round's moved positions before they are written to the topic (the flow's translate
    # loop takes them from here rather than after the write and its read back)
    on_stamped: Callable[[list[GroupCommit]], None] = lambda commits: None
    # the destination's cluster.id when the flow forwards positions dr-stream synced here (a chain)
    forward_except: str | None = None
    # told, every `gone_check_s`, what a full read found on the source (`gone_positions`): the
    # flow forgets the positions it lacks for long enough
    on_source_groups: Callable[[SourceGroups], None] | None = None
    gone_check_s: float = 60.0
    # groups that exist beyond what the positions reader lists (Kafka Streams groups, which the
    # admin path's consumer-group listing leaves out): never taken as gone
    unlisted_groups: Callable[[], Iterable[str]] = lambda: ()
    reported: dict[tuple[str, str, int], int] = field(default_factory=dict)
    errors: int = 0
    # positions the flow forgot (`forget`), whose records in `__consumer_timestamps` are deleted
    # by the next full read that still lacks them
    _forgetting: set[tuple[str, str, int]] = field(default_factory=set)
    _forgetting_lock: threading.Lock = field(default_factory=threading.Lock)
    pace: LoopPace = field(init=False)
    _failures: FailureNotes = field(init=False)
    # the next fetch reads every selected group in full, not only what changed: the first round,
    # and any round after one whose positions were not all acknowledged
    _resend: bool = True
    _checked_at: float = float("-inf")
    # the clients a round uses, opened by `open` and closed by `close`
    _positions: CommittedPositions = field(init=False)
    _producer: Producer = field(init=False)
    _timestamps: RecordTimestamps = field(init=False)

    def __post_init__(self) -> None:
        self.pace = LoopPace(self.interval_s)
        self._failures = FailureNotes(
            self.log, lambda group, cause: f"group poller: {group}: committed offsets not read: {cause}",
            lambda group: f"group poller: {group}: committed offsets read again")

    def poll_once(self) -> int:
        """Reports the positions that moved since the last round; returns how many were delivered.
        A position is taken as reported only once the source acknowledged it."""
        began = time.monotonic()
        # A round that did not end with every position acknowledged (or did not end) is followed
        # by a full read, which returns what it lost.
        check = self.on_source_groups is not None and began - self._checked_at >= self.gone_check_s
        full, self._resend = self._resend or check, True
        try:
            selected, fetched = self._positions.read(full)
        except NotAuthorized as refused:
            if self._positions.name == "admin":
                raise
            self.log(f"group poller: {first_line(refused)}; reading committed offsets through the admin API "
                     "instead (offsets.positions_from: admin)")
            self._positions.close()
            self._positions = AdminPositions(self.source, self.groups)
            selected, fetched = self._positions.read(True)
        deleting = self._took_source_groups(fetched, began) if full else set()
        moved, unread = moved_commits(fetched, self.topics, self.reported, self.forward_except)
        self._failures.round({g: str(exc) for g, exc in unread.items()}, fetched)
        commits = stamped(moved, self._timestamps)
        if commits:
            self.on_stamped(commits)
        # What dr-stream synced here is this flow's alone to pass on: on the source's shared
        # topic, the flow running back to where it came from would read it too.
        synced = _synced_here(fetched)
        passed_on = [c for c in commits if c.key in synced]
        commits = [c for c in commits if c.key not in synced]
        for c in passed_on:
            self.reported[c.key] = c.offset
        delivered: list[GroupCommit] = []
        failed: list[str] = []

        def tell(commit: GroupCommit, error: KafkaError | None) -> None:
            if error is None:
                delivered.append(commit)
            else:
                failed.append(error.str())

        deleted: list[tuple[str, str, int]] = []

        def told(position: tuple[str, str, int], error: KafkaError | None) -> None:
            if error is None:  # one not deleted stays forgotten: deleted at the next full read
                deleted.append(position)

        report(self._producer, commits, tell)
        report_gone(self._producer, sorted(deleting), told)
        self._producer.flush(10)
        for c in delivered:
            self.reported[c.key] = c.offset
        self._deleted(deleted, len(deleting))
        self._resend = len(delivered) < len(commits)
        self.pace.done(time.monotonic() - began)
        self.on_round(self.pace.last_round_s, selected, self.pace.period_s)
        if self._resend:
            cause = failed[0] if failed else "not acknowledged within 10 s"
            raise RuntimeError(f"{len(commits) - len(delivered)} of {len(commits)} positions not written to "
                               f"{CONSUMER_TIMESTAMPS_TOPIC} ({cause}); written again next round")
        return len(delivered)

    def forget(self, positions: set[tuple[str, str, int]]) -> None:
        """The flow forgot these positions (`gone_positions`): their records in
        `__consumer_timestamps` are deleted at the next full read that still lacks them, so the
        topic keeps a record per position that exists, not per position ever committed."""
        with self._forgetting_lock:
            self._forgetting |= positions

    def _took_source_groups(self, fetched: dict[str, Fetched], taken_at: float) -> set[tuple[str, str, int]]:
        """A full read: what it reported of groups the source no longer holds is dropped, and the
        flow is told what the source holds, when the read is evidence of it. Returns the forgotten
        positions whose records to delete: those the read still lacks (one held again, its group
        made anew, keeps its records)."""
        unread = self._positions.unread()
        if unread is None:
            return set()  # a reader still catching up, or records it could not decode: no evidence
        read = SourceGroups({g: frozenset(f) for g, f in fetched.items() if not isinstance(f, Exception)},
                            unread | {g for g, f in fetched.items() if isinstance(f, Exception)}
                            | set(self.unlisted_groups()), taken_at)
        self.reported = {key: offset for key, offset in self.reported.items() if read.holds(key)}
        self._checked_at = taken_at
        if self.on_source_groups is not None:
            self.on_source_groups(read)
        with self._forgetting_lock:
            self._forgetting = {key for key in self._forgetting if key[0] in read.unread or not read.holds(key)}
            return {key for key in self._forgetting if not read.holds(key)}

    def _deleted(self, positions: list[tuple[str, str, int]], tried: int) -> None:
        if not tried:
            return
        with self._forgetting_lock:
            self._forgetting.difference_update(positions)
        left = f"; {tried - len(positions)} not acknowledged, tried again at the next full read" \
            if len(positions) < tried else ""
        self.log(f"{CONSUMER_TIMESTAMPS_TOPIC}: the records of {len(positions)} forgotten positions deleted on "
                 f"{self.source.alias} (tombstones; compaction removes them){left}")

    def _open_positions(self) -> CommittedPositions:
        if self.positions_from == "admin":
            return AdminPositions(self.source, self.groups)
        return TopicPositions(self.source.config, self.groups, lambda n, why: self.log(
            f"group poller: {n} records of __consumer_offsets on {self.source.alias} not decoded, skipped "
            f"(last: {why})"))

    def open(self, positions: CommittedPositions | None = None) -> None:
        """Opens the clients a round uses (`run` does; a bench hands in its own positions reader)."""
        self._positions = positions or self._open_positions()
        self._producer = self.source.producer({"linger.ms": 0, "acks": "all"})
        self._timestamps = RecordTimestamps(self.source)

    def close(self) -> None:
        self._timestamps.close()
        self._producer.close()
        self._positions.close()

    def run(self, stop: threading.Event) -> None:
        """Polls until `stop` is set; its clients live exactly as long as this call."""
        self.open()
        try:
            while not stop.is_set():
                try:
                    self.poll_once()
                except Exception as exc:  # the source may be briefly unreachable; report, keep polling
                    self.errors += 1
                    if self.errors == 1 or self.errors % 60 == 0:
                        self.log(f"group poller: {first_line(exc)} ({self.errors} failed polls so far)")
                stop.wait(self.pace.wait_s())
        finally:
            self.close()
