"""`offsets.share_groups:` of the flow file: which share groups (KIP-932) a flow syncs, and how often.

Off unless `include` names some: a share group is a Kafka 4 feature, and its sync runs a helper
JVM of its own (`kafka/kafka4_groups`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dr_stream.core.config_reader import YamlReader
from dr_stream.core.policy import GroupFilter


@dataclass(frozen=True)
class ShareGroupsConfig:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    interval_s: float = 5.0

    @property
    def enabled(self) -> bool:
        return bool(self.include)

    @property
    def filter(self) -> GroupFilter:
        return GroupFilter(self.include, self.exclude)


def read_share_groups(r: YamlReader, raw: Any) -> ShareGroupsConfig:
    s = r.mapping(raw, "offsets.share_groups", {"include", "exclude", "interval"})
    interval = r.duration_s(s, "interval", "offsets.share_groups", "5s")
    if interval < 1:
        raise r.fail("offsets.share_groups.interval", f"{interval:g}s is shorter than 1s: each round lists the "
                                                      "source's share groups and reads their offsets")
    return ShareGroupsConfig(r.regexes(s, "include", "offsets.share_groups", ()),
                             r.regexes(s, "exclude", "offsets.share_groups", ()), interval)
