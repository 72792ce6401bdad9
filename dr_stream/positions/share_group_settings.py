"""A share group's settings made on the destination as they are on the source.

Which records a share group gets is decided by its group configs as well as by its start
offsets: `share.auto.offset.reset` says where a share-partition the group has no state for yet
begins (a partition it never read: `latest` by default, `earliest`, or `by_duration:<d>`),
`share.isolation.level` whether it sees uncommitted records, `share.delivery.count.limit` and
`share.record.lock.duration.ms` how often and for how long a record is handed out. A start offset
can only be translated where the source group has one, so without its settings a failed-over
group would begin every partition it never read at the destination's default, `latest`, and skip
the copies of every record already there.

The rule (`settings_changes`, pure): the destination group's `share.*` configs become exactly
those the source group set itself: each one set there, or changed, is set; one the destination
group set that the source group did not is deleted, so both fall back to the same default. A
source group's settings are set only while the destination group has no members (absent, EMPTY
or DEAD), like its start offsets: a group running there is never changed under its consumers.

Invariants: the source's settings are read every round, the destination's only for a group whose
source settings changed since they were last made equal (or that was not made equal yet); a
group is said once when its settings are set, and a failure or a skip once per group and cause.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from dr_stream.failure_notes import FailureNotes, first_line
from dr_stream.kafka.group_offsets import INACTIVE_STATES
from dr_stream.kafka.group_offsets.kafka4 import ShareGroupOffsets

SHARE_SETTINGS = "share."


def settings_changes(source: Mapping[str, str], destination: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """What makes the destination group's `share.*` configs those the source group set itself:
    (keys to set with their values, keys to delete)."""
    wanted = {k: v for k, v in source.items() if k.startswith(SHARE_SETTINGS)}
    present = {k: v for k, v in destination.items() if k.startswith(SHARE_SETTINGS)}
    return {k: v for k, v in sorted(wanted.items()) if present.get(k) != v}, sorted(set(present) - set(wanted))


def settings_line(group: str, destination: str, set_to: Mapping[str, str], deleted: list[str]) -> str:
    said = [f"{k}={v}" for k, v in sorted(set_to.items())] + [f"{k} back to its default" for k in deleted]
    return f"share group {group}: settings made as on the source on {destination}: {', '.join(said)}"


@dataclass
class ShareGroupSettings:
    source: ShareGroupOffsets
    destination: ShareGroupOffsets
    destination_alias: str
    interval_s: float
    log: Callable[[str], None]
    # group -> the source settings last made equal on the destination
    _equal: dict[str, dict[str, str]] = field(default_factory=dict)
    _failures: FailureNotes = field(init=False)

    def __post_init__(self) -> None:
        self._failures = FailureNotes(
            self.log, lambda group, cause: f"share group {group}: settings not made as on the source on "
                                           f"{self.destination_alias}: {cause} "
                                           f"(tried again every {self.interval_s:g} s)",
            lambda group: f"share group {group}: settings made as on the source on {self.destination_alias} again")

    def round(self, groups: list[str]) -> int:
        """Reads the groups' settings on the source and makes those that changed equal on the
        destination; how many groups it could not."""
        failed: dict[str, str] = {}
        changed: dict[str, dict[str, str]] = {}
        listed = set(groups)  # a group the source no longer lists leaves nothing behind
        self._equal = {g: equal for g, equal in self._equal.items() if g in listed}
        self._failures.forget(self._failures.subjects - listed)
        for group, found in self.source.configs(groups).items():
            if isinstance(found, Exception):
                failed[group] = f"reading them on the source: {first_line(found)}"
            elif self._equal.get(group) != {k: v for k, v in found.items() if k.startswith(SHARE_SETTINGS)}:
                changed[group] = found
        if changed:
            self._make_equal(changed, failed)
        self._failures.round(failed, groups)
        return len(failed)

    def _make_equal(self, changed: dict[str, dict[str, str]], failed: dict[str, str]) -> None:
        names = sorted(changed)
        states, there = self.destination.states(names), self.destination.configs(names)
        for group in names:
            state, present = states.get(group), there.get(group)
            if isinstance(state, Exception | None) or isinstance(present, Exception | None):
                unread = next((a for a in (state, present) if isinstance(a, Exception)), "not answered")
                failed[group] = f"reading them on the destination: {first_line(unread)}"
                continue
            if state[0] not in INACTIVE_STATES:
                failed[group] = f"group is {state[0]} on the destination"
                continue
            set_to, deleted = settings_changes(changed[group], present)
            if set_to or deleted:
                refused = self.destination.alter_configs(group, set_to, deleted)
                if refused is not None:
                    failed[group] = first_line(refused)
                    continue
                self.log(settings_line(group, self.destination_alias, set_to, deleted))
            self._equal[group] = {k: v for k, v in changed[group].items() if k.startswith(SHARE_SETTINGS)}
