"""Writing translated offsets to destination groups (DESIGN 1.6, KIP-545).

Invariants: offsets are written only to groups with no members on the destination (absent,
EMPTY or DEAD), so a consumer running there is never overwritten; a destination offset is
never moved backwards unless the operator forces it (`failover --force`); every partition
gets an action that says what happened and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from dr_stream.groups import INACTIVE_STATES, SYNC_METADATA_PREFIX, commit_offsets, committed_offsets, group_state


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
        return self.action in ("committed", "rewound (--force)")


class OffsetSync:
    def __init__(self, destination: dict[str, str], flow_name: str) -> None:
        self.admin = AdminClient(dict(destination))
        self.metadata = f"{SYNC_METADATA_PREFIX}{flow_name}"

    def apply(self, group: str, wanted: dict[tuple[str, int], int], force: bool = False,
              dry_run: bool = False) -> list[SyncAction]:
        state, members = group_state(self.admin, group)
        current = {k: c.offset for k, c in committed_offsets(self.admin, group).items()}
        if state not in INACTIVE_STATES:
            reason = f"skipped: group is {state} on the destination ({members} members)"
            return [SyncAction(group, t, p, o, current.get((t, p)), reason) for (t, p), o in sorted(wanted.items())]
        actions, to_write = [], {}
        for (topic, partition), offset in sorted(wanted.items()):
            have = current.get((topic, partition))
            if have == offset:
                action = "unchanged"
            elif have is not None and have > offset and not force:
                action = f"skipped: destination is ahead at {have}; not rewound (--force rewinds)"
            else:
                rewind = have is not None and have > offset
                action = ("would rewind (--force)" if rewind else "would commit") if dry_run else (
                    "rewound (--force)" if rewind else "committed")
                to_write[(topic, partition)] = offset
            actions.append(SyncAction(group, topic, partition, offset, have, action))
        if to_write and not dry_run:
            commit_offsets(self.admin, group, to_write, self.metadata)
        return actions
