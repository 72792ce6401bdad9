"""The second writer of `__consumer_timestamps`: dr-stream itself, from committed offsets.

Unmodified consumers (any language, no helper) commit offsets to the source cluster as
usual; this poller reads them every `interval_s`, looks up the timestamp of the last record
each group consumed, and reports the positions that changed.

Invariants: only groups the flow translates and topics it replicates are reported; a
position dr-stream itself committed (metadata `dr-stream:...`, written by the flow running
the other way) is never reported, so two flows can not echo a translation back and forth.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from dr_stream.consumer_timestamps import GroupCommit, RecordTimestamps, report
from dr_stream.groups import committed_offsets, list_groups
from dr_stream.policy import GroupFilter, TopicFilter


def current_commits(admin: AdminClient, groups: GroupFilter, topics: TopicFilter,
                    group_pattern: str | None = None) -> list[GroupCommit]:
    """The consumers' own committed positions on the replicated topics (timestamps not looked up)."""
    import re

    out = []
    for group in list_groups(admin):
        if not groups.matches(group) or (group_pattern and not re.fullmatch(group_pattern, group)):
            continue
        for (topic, partition), committed in committed_offsets(admin, group).items():
            if topics.matches(topic) and not committed.written_by_dr_stream:
                out.append(GroupCommit(group, topic, partition, committed.offset))
    return out


@dataclass
class CommittedOffsetPoller:
    source: dict[str, str]
    groups: GroupFilter
    topics: TopicFilter
    interval_s: float = 1.0
    log: Callable[[str], None] = print
    reported: dict[tuple[str, str, int], int] = field(default_factory=dict)
    errors: int = 0

    def __post_init__(self) -> None:
        self._admin = AdminClient(dict(self.source))
        self._producer = Producer({**self.source, "linger.ms": 0, "acks": "all"})
        self._timestamps = RecordTimestamps(self.source)

    def poll_once(self) -> int:
        """Reports the positions that moved since the last poll; returns how many."""
        changed = [c for c in current_commits(self._admin, self.groups, self.topics)
                   if self.reported.get(c.key) != c.offset]
        stamped = [GroupCommit(c.group, c.topic, c.partition, c.offset,
                               self._timestamps.before(c.topic, c.partition, c.offset)) for c in changed]
        report(self._producer, stamped)
        self._producer.flush(10)
        for c in stamped:
            self.reported[c.key] = c.offset
        return len(stamped)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.poll_once()
            except Exception as exc:  # the source may be briefly unreachable; report, keep polling
                self.errors += 1
                if self.errors == 1 or self.errors % 60 == 0:
                    self.log(f"group poller: {str(exc).splitlines()[0]} ({self.errors} failed polls so far)")
            stop.wait(self.interval_s)
        self._timestamps.close()
