"""Which of the source's ACLs the destination gets, and as what: the rule behind `acls:`.

Copied: the topic ACLs of the replicated topics and the group ACLs of the translated groups,
so that a principal that reads a topic as its group on the source does the same on the
destination after failover.
- A literal topic ACL names a replicated topic: it names that topic's copy (`topics.rename`).
  `*` stays `*` when the rename keeps names; with a rename prefix it becomes that prefix
  (every copy); with a suffix nothing on the destination says "every copy", so it is reported.
- A prefixed topic ACL whose prefix starts a replicated topic's name gets the rename's prefix
  in front. With a rename suffix (`${topic}.replica`) no prefix covers exactly the copies, so
  it is reported, not widened or dropped.
- Group names are not renamed: a literal group ACL is copied for a translated group (or `*`),
  a prefixed one when it starts a translated group's name.
- The destination of an active-passive pair is a replica: ALLOW of the operations that change
  a topic (WRITE, CREATE, DELETE, ALTER, ALTER_CONFIGS) is left out unless `acls.write` is on
  (active-active), and ALLOW ALL on a topic becomes READ, DESCRIBE and DESCRIBE_CONFIGS. DENY
  is always copied: it only ever takes access away.

Invariant: every source ACL about a replicated topic or a translated group either maps to
destination ACLs or is left out with its reason; none disappears without one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dr_stream.core.policy import GroupFilter, TopicFilter, TopicRenamer

CHANGES_TOPIC = frozenset({"WRITE", "CREATE", "DELETE", "ALTER", "ALTER_CONFIGS"})
READS_TOPIC = ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")


@dataclass(frozen=True, order=True)
class Acl:
    resource_type: str  # TOPIC or GROUP
    name: str
    pattern: str  # LITERAL or PREFIXED
    principal: str
    host: str
    operation: str
    permission: str  # ALLOW or DENY

    def shown(self) -> str:
        pattern = "" if self.pattern == "LITERAL" else f" ({self.pattern.lower()})"
        return f"{self.permission} {self.principal} {self.operation} {self.resource_type} {self.name}{pattern}" + (
            "" if self.host == "*" else f" from {self.host}")


@dataclass(frozen=True)
class AclMapping:
    wanted: frozenset[Acl]  # on the destination
    left_out: tuple[tuple[Acl, str], ...]  # source ACLs not copied (or narrowed), each with why
    unmappable: tuple[tuple[Acl, str], ...]  # the part of left_out no setting can bring over


def map_acls(source: Iterable[Acl], topics: Iterable[str], groups: Iterable[str], topic_filter: TopicFilter,
             group_filter: GroupFilter, renamer: TopicRenamer, write: bool) -> AclMapping:
    """`topics`, `groups`: the replicated topics and translated groups the source lists now."""
    topics = sorted(t for t in topics if topic_filter.matches(t))
    groups = sorted(g for g in groups if group_filter.matches(g))
    wanted: set[Acl] = set()
    left_out: list[tuple[Acl, str]] = []
    unmappable: list[tuple[Acl, str]] = []
    for acl in sorted(set(source)):
        if acl.resource_type == "TOPIC":
            names, why = _topic_names(acl, topics, topic_filter, renamer)
        elif acl.resource_type == "GROUP":
            names, why = _group_names(acl, groups, group_filter), ""
        else:
            continue  # cluster, transactional id, token ACLs are about the cluster itself, not the data
        if why:
            unmappable.append((acl, why))
            continue
        if not names:  # not about a replicated topic or a translated group
            continue
        operations, narrowed = _operations(acl, write)
        if narrowed:
            left_out.append((acl, narrowed))
        wanted.update(Acl(acl.resource_type, name, pattern, acl.principal, acl.host, op, acl.permission)
                      for name, pattern in names for op in operations)
    return AclMapping(frozenset(wanted), tuple(left_out + unmappable), tuple(unmappable))


def _topic_names(acl: Acl, topics: list[str], topic_filter: TopicFilter,
                 renamer: TopicRenamer) -> tuple[list[tuple[str, str]], str]:
    """The destination names (name, pattern) for a topic ACL, or why there are none."""
    prefix, suffix = renamer.affixes
    if acl.pattern == "LITERAL" and acl.name == "*":
        if renamer.is_identity():
            return [("*", "LITERAL")], ""
        if not suffix:
            return [(prefix, "PREFIXED")], ""
        return [], f"the rename {renamer.template} adds a suffix: no ACL on the destination names every copy"
    if acl.pattern == "LITERAL":
        replicated = topic_filter.matches(acl.name)
        return ([(renamer.format_remote_topic(acl.name), "LITERAL")] if replicated else []), ""
    if not any(t.startswith(acl.name) for t in topics):
        return [], ""
    if suffix:
        return [], (f"the rename {renamer.template} adds a suffix: no prefix on the destination covers exactly "
                    f"the copies of {acl.name}*")
    return [(prefix + acl.name, "PREFIXED")], ""


def _group_names(acl: Acl, groups: list[str], group_filter: GroupFilter) -> list[tuple[str, str]]:
    if acl.pattern == "LITERAL":
        return [(acl.name, "LITERAL")] if acl.name == "*" or group_filter.matches(acl.name) else []
    return [(acl.name, "PREFIXED")] if any(g.startswith(acl.name) for g in groups) else []


def _operations(acl: Acl, write: bool) -> tuple[tuple[str, ...], str]:
    """The operations to grant on the destination, and why any were left out."""
    if acl.permission == "DENY" or write or acl.resource_type != "TOPIC":
        return (acl.operation,), ""
    if acl.operation == "ALL":
        return READS_TOPIC, f"ALL narrowed to {', '.join(READS_TOPIC)} (acls.write is off: the copies are a replica)"
    if acl.operation in CHANGES_TOPIC:
        return (), f"{acl.operation} left out (acls.write is off: the copies are a replica)"
    return (acl.operation,), ""
