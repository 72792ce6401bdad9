"""Share groups' positions (KIP-932) translated and set on the destination.

A share group's consumers commit no offsets. The group keeps, for each share-partition, a start
offset: every record before it is done with (acknowledged, released for good or rejected), records
at or after it may be in flight or waiting. A share group that fails over must therefore begin at
the copy of that start offset: nothing the source group had not finished with is skipped, and the
records after it that were already done are delivered again, which share groups allow (their
delivery is at least once).

Each round (`offsets.share_groups.interval`) the flow lists the source's share groups that
`offsets.share_groups` selects, reads their start offsets, translates each like a consumer group's
commit (`OffsetTranslator` over the flow's live offset index) and sets it on the destination under
the consumer groups' rule (`group_sync.decide`): only on a share group with no members there
(absent, EMPTY or DEAD; the broker refuses the others itself) and never backwards. A `waiting`
translation is not set, as for consumer groups. The calls go through Kafka 4's admin API in a
helper JVM (`kafka/group_offsets/kafka4`).

Before the start offsets, each round makes the groups' own settings (`share.auto.offset.reset`,
...) on the destination as they are on the source (`share_group_settings`): a share-partition the
source group never read has no start offset to translate, and begins where that setting says.

Invariants: a start offset is set again only when the source's moved; one that is not set yet
(waiting, refused, a group with members on the destination) is tried again every round, so a
share group that stopped on the source gets its position as soon as the destination group is
empty. Each failure and each skip is said once per group and cause; that a group's start offsets
are set is said once, and again after a skip or a failure (a busy group's move every round).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dr_stream.core.config import FlowConfig
from dr_stream.core.contracts import UNKNOWN_TIMESTAMP
from dr_stream.core.policy import GroupFilter, TopicFilter
from dr_stream.failure_notes import FailureNotes, first_line, summarised
from dr_stream.kafka.cluster_context import FlowClusters
from dr_stream.kafka.group_offsets.kafka4 import Kafka4Groups, ShareGroupOffsets
from dr_stream.positions.consumer_timestamps import GroupCommit
from dr_stream.positions.group_sync import GroupSync, sync_translations
from dr_stream.positions.offset_translator import Locate, OffsetTranslator
from dr_stream.positions.share_group_settings import ShareGroupSettings
from dr_stream.positions.sync_outcome import WAITING, Synced, SyncOutcome
from dr_stream.positions.translation_rule import Translation

Key = tuple[str, str, int]
# What leaves a start offset handled until the source's moves: set now, already there, or the
# destination ahead (never moved backwards).
_HANDLED = frozenset({SyncOutcome.COMMITTED, SyncOutcome.UNCHANGED, SyncOutcome.AHEAD})
_SHOWN = 6


def handled(action: Synced) -> bool:
    return action.outcome in _HANDLED


def set_line(group: str, destination: str, done: list[tuple[Translation, Synced]]) -> str:
    """The one line that says which start offsets of a share group a round set."""
    items = [f"{t.dest_topic}[{t.dest_partition}] {t.offset} ({t.method}, source {t.source_offset})"
             for t, action in done if action.outcome is SyncOutcome.COMMITTED]
    more = f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else ""
    return f"share group {group}: start offsets set on {destination}: {', '.join(items[:_SHOWN])}{more}"


def skip_reason(translations: list[tuple[Translation, Synced]]) -> str | None:
    """Why a share group's positions are not set this round, when none of them failed: its first
    untranslated or skipped partition's reason (they share it: members, or the same index gap)."""
    for t, action in translations:
        if t.method == "waiting":
            continue
        if t.offset is None:
            return f"{t.topic}[{t.partition}] not translated ({t.note})"
        if action.outcome in (SyncOutcome.HELD, SyncOutcome.NOT_TRANSLATED):
            return action.reason
    return None


@dataclass
class ShareGroupSync:
    source: ShareGroupOffsets
    translator: OffsetTranslator
    sync: GroupSync
    groups: GroupFilter
    topics: TopicFilter
    destination: str
    interval_s: float = 5.0
    log: Callable[[str], None] = print
    # told each round's duration, the positions it translated, and the period it ran at
    on_round: Callable[[float, int, float], None] = lambda seconds, positions, period_s: None
    # the groups' `share.*` configs made as on the source, before their start offsets are set
    settings: ShareGroupSettings | None = None
    # told each round how many groups' offsets or settings (`what`) it left unlike the source
    not_synced: Callable[[str, int], None] = lambda what, groups: None
    # key -> the source start offset whose translation is handled
    _handled: dict[Key, int] = field(default_factory=dict)
    _skips: dict[str, str] = field(default_factory=dict)
    # groups whose setting was said and has gone on since without a skip or a failure
    _said_set: set[str] = field(default_factory=set)
    totals: dict[str, int] = field(default_factory=lambda: {"rounds": 0, "set": 0})
    _failures: FailureNotes = field(init=False)

    def __post_init__(self) -> None:
        self._failures = FailureNotes(
            self.log, lambda group, cause: f"share group {group}: start offsets not set on {self.destination}: "
                                           f"{cause} (tried again every {self.interval_s:g} s)",
            lambda group: f"share group {group}: start offsets set on {self.destination} again")

    @classmethod
    def of(cls, config: FlowConfig, clusters: FlowClusters, locate: Locate, helper: Kafka4Groups | None,
           log: Callable[[str], None],
           not_synced: Callable[[str, int], None] = lambda what, groups: None,
           on_round: Callable[[float, int, float], None] = lambda seconds, positions, period_s: None
           ) -> ShareGroupSync | None:
        """The flow's share-group sync through its Kafka 4 helper (`kafka4.flow_helper`, the
        flow's to close), None when `offsets.share_groups` selects none."""
        selected = config.offsets.share_groups
        if not selected.enabled:
            return None
        if helper is None:  # `flow_helper` gives none without sync_to_destination
            log("warning: offsets.share_groups is ignored: offsets.sync_to_destination is off, and setting "
                "share groups' start offsets is all the share-group sync does")
            return None
        translator = OffsetTranslator(locate, config.renamer, clusters.destination, source=clusters.source,
                                      header=config.provenance.header)
        on_source = ShareGroupOffsets(helper, config.source)
        on_destination = ShareGroupOffsets(helper, config.destination)
        sync = GroupSync(clusters.destination, config.name, batched=True, offsets=on_destination)
        settings = ShareGroupSettings(on_source, on_destination, config.destination.alias, selected.interval_s, log)
        return cls(on_source, translator, sync, selected.filter, config.topic_filter,
                   config.destination.alias, selected.interval_s, log, settings=settings, not_synced=not_synced,
                   on_round=on_round)

    def round(self) -> list[tuple[Translation, Synced]]:
        """Reads the selected source share groups, translates what moved or is not set yet, and
        sets it; returns each translation with its action."""
        selected = sorted(g for g in self.source.listed() if self.groups.matches(g))
        if self.settings is not None:
            self.not_synced("settings", self.settings.round(selected))
        failed: dict[str, str] = {}
        commits = []
        read: dict[str, set[tuple[str, int]]] = {}
        for group, found in self.source.committed(selected).items():
            if isinstance(found, Exception):
                failed[group] = f"reading its start offsets on the source: {first_line(found)}"
                continue
            read[group] = set(found)
            commits += [GroupCommit(group, t, p, c.offset, UNKNOWN_TIMESTAMP) for (t, p), c in sorted(found.items())
                        if self.topics.matches(t) and self._handled.get((group, t, p)) != c.offset]
        self._forget_gone(selected, read)
        translations = self.translator.translate(commits)
        actions = sync_translations(self.sync, [t for t in translations if t.method != "waiting"])
        done = [(t, actions.get(t.key, WAITING)) for t in translations]
        self._said(done, failed)
        self.totals["rounds"] += 1
        return done

    def _forget_gone(self, selected: list[str], read: dict[str, set[tuple[str, int]]]) -> None:
        """What is kept per group holds only the groups the source lists, and per group only the
        partitions it has a start offset for (`read`, for the groups read this round): a group
        deleted, or a topic it no longer reads, leaves nothing behind."""
        listed = set(selected)
        self._handled = {k: v for k, v in self._handled.items()
                         if k[0] in listed and (k[0] not in read or (k[1], k[2]) in read[k[0]])}
        self._skips = {g: r for g, r in self._skips.items() if g in listed}
        self._said_set &= listed
        self._failures.forget(self._failures.subjects - listed)

    def _said(self, done: list[tuple[Translation, Synced]], failed: dict[str, str]) -> None:
        by_group: dict[str, list[tuple[Translation, Synced]]] = {}
        for t, action in done:
            by_group.setdefault(t.group, []).append((t, action))
            if handled(action):
                self._handled[t.key] = t.source_offset
            elif action.failed:
                failed[t.group] = action.reason
        unsynced = set(failed)
        for group, items in sorted(by_group.items()):
            written = sum(1 for _, action in items if action.outcome is SyncOutcome.COMMITTED)
            self.totals["set"] += written
            if written and group not in self._said_set:  # a busy group moves every round: said once
                self._said_set.add(group)
                self.log(set_line(group, self.destination, items))
            reason = None if group in failed else skip_reason(items)
            if reason or group in failed:
                self._said_set.discard(group)
            if reason and self._skips.get(group) != reason:
                self.log(f"share group {group}: not set on {self.destination}: {reason}; tried again every "
                         f"{self.interval_s:g} s")
            if reason:
                self._skips[group] = reason
                unsynced.add(group)
            else:
                self._skips.pop(group, None)
        self.not_synced("offsets", len(unsynced))
        self._failures.round(failed, by_group)

    def run(self, stop: threading.Event) -> None:
        """A round every `interval_s` until `stop` is set."""
        failed = summarised(self.log)
        while not stop.is_set():
            began = time.monotonic()
            try:
                done = self.round()
                took = time.monotonic() - began
                self.on_round(took, len(done), max(took, self.interval_s))
            except Exception as exc:  # a cluster briefly away, the helper restarting: the next round tries again
                failed(f"share groups: {first_line(exc)}")
            stop.wait(self.interval_s)

    def close(self) -> None:
        self.translator.close()
        self.sync.close()
