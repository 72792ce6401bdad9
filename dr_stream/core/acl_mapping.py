"""Which of the source's ACLs the destination gets, and as what: the rule behind `acls:`.

Copied: the topic ACLs of the replicated topics and the group ACLs of the translated groups,
so that a principal that reads a topic as its group on the source does the same on the
destination after failover. The sync never widens access: what the destination is granted is
at most what the source grants on the copies of the topics the flow replicates and on the
groups it translates, nothing on anything else the destination holds.
- A literal topic ACL names a replicated topic: it names that topic's copy (`topics.rename`).
- A wildcard (`*`) or prefixed topic ACL becomes a literal ACL on the copy of each replicated
  topic it covers on the source now. Copied as it is, `*` would cover the destination's own
  topics, the ones the flow does not copy and dr-stream's `__dr_stream_*`; a prefix would cover
  whatever else the destination holds under it. A topic created later is covered at the next
  pass, once the flow replicates it.
- Group names are not renamed: a literal group ACL is copied for a translated group; a wildcard
  or prefixed one becomes a literal ACL on each translated group it covers that the source lists.
- A wildcard principal (`User:*`) is not copied: on the destination it would name every
  principal there, not the source's. It is reported, so `drill` says what to grant by hand.
- A DENY that names the flow's own principal on the destination (`acls.principal`, else the
  SASL username the flow connects with) is refused and reported: it could stop the flow copying.
- The destination of an active-passive pair is a replica: ALLOW of the operations that change
  a topic (WRITE, CREATE, DELETE, ALTER, ALTER_CONFIGS) is left out unless `acls.write` is on
  (active-active), and ALLOW ALL on a topic becomes READ, DESCRIBE and DESCRIBE_CONFIGS. Any
  other DENY is copied, on the same names an ALLOW would be.

Invariant: every source ACL about a replicated topic or a translated group either maps to
destination ACLs on those names only or is left out with its reason; none disappears without
one, and no destination ACL the mapping wants covers a name outside them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dr_stream.core.librdkafka_settings import ClientSettingsError, parse_jaas
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
    # the part of left_out not copied for the flow's own sake (a DENY of its principal): no
    # application loses access to what it had
    refused: tuple[tuple[Acl, str], ...] = ()

    def copied(self, acl: Acl, why: str) -> bool:
        """Whether the left-out `acl` was copied at all, narrowed."""
        return (acl, why) not in self.unmappable and (acl, why) not in self.refused


def map_acls(source: Iterable[Acl], topics: Iterable[str], groups: Iterable[str], topic_filter: TopicFilter,
             group_filter: GroupFilter, renamer: TopicRenamer, write: bool, own_principal: str | None = None
             ) -> AclMapping:
    """`topics`, `groups`: the replicated topics and translated groups the source lists now;
    `own_principal`: the flow's principal on the destination, when known."""
    topics = sorted(t for t in topics if topic_filter.matches(t))
    groups = sorted(g for g in groups if group_filter.matches(g))
    wanted: set[Acl] = set()
    left_out: list[tuple[Acl, str]] = []
    unmappable: list[tuple[Acl, str]] = []
    refused: list[tuple[Acl, str]] = []
    for acl in sorted(set(source)):
        if acl.resource_type == "TOPIC":
            names = _topic_names(acl, topics, topic_filter, renamer)
        elif acl.resource_type == "GROUP":
            names = _group_names(acl, groups, group_filter)
        else:
            continue  # cluster, transactional id, token ACLs are about the cluster itself, not the data
        if not names:  # not about a replicated topic or a translated group
            continue
        if acl.principal.endswith(":*"):
            unmappable.append((acl, f"the wildcard principal {acl.principal} would name every principal of the "
                                    "destination, not the source's: grant the principals it means there by hand"))
            continue
        if acl.permission == "DENY" and own_principal is not None and acl.principal == own_principal:
            refused.append((acl, f"a DENY of {acl.principal}, the flow's own principal on the destination, could "
                                 "stop it copying"))
            continue
        operations, narrowed = _operations(acl, write)
        if narrowed:
            left_out.append((acl, narrowed))
        elif acl.pattern != "LITERAL" or acl.name == "*":
            left_out.append((acl, _narrowed_to(names)))
        wanted.update(Acl(acl.resource_type, name, "LITERAL", acl.principal, acl.host, op, acl.permission)
                      for name in names for op in operations)
    return AclMapping(frozenset(wanted), tuple(left_out + refused + unmappable), tuple(unmappable), tuple(refused))


def _narrowed_to(names: list[str]) -> str:
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"granted on the names it covers that the flow copies only: {shown}"


def _covers(acl: Acl, name: str) -> bool:
    if acl.pattern == "LITERAL":
        return acl.name in ("*", name)
    return name.startswith(acl.name)


def _topic_names(acl: Acl, topics: list[str], topic_filter: TopicFilter, renamer: TopicRenamer) -> list[str]:
    """The destination topics a topic ACL is granted on: the copies of the replicated topics it covers."""
    if acl.pattern == "LITERAL" and acl.name != "*":
        return [renamer.format_remote_topic(acl.name)] if topic_filter.matches(acl.name) else []
    return [renamer.format_remote_topic(t) for t in topics if _covers(acl, t)]


def _group_names(acl: Acl, groups: list[str], group_filter: GroupFilter) -> list[str]:
    """The groups a group ACL is granted on: the translated groups it covers."""
    if acl.pattern == "LITERAL" and acl.name != "*":
        return [acl.name] if group_filter.matches(acl.name) else []
    return [g for g in groups if _covers(acl, g)]


def own_principal(kafka: Mapping[str, str], given: str | None) -> str | None:
    """The flow's principal on a cluster: `given` (`acls.principal`), else `User:<username>` of
    a PLAIN or SCRAM login; None when neither says (a TLS certificate's principal depends on the
    broker's mapping rules)."""
    if given:
        return given
    if not kafka.get("security.protocol", "").upper().startswith("SASL"):
        return None
    if kafka.get("sasl.mechanism", "").upper() not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        return None
    try:
        _, options = parse_jaas(kafka.get("sasl.jaas.config", ""))
    except ClientSettingsError:
        return None
    return f"User:{options['username']}" if options.get("username") else None


def _operations(acl: Acl, write: bool) -> tuple[tuple[str, ...], str]:
    """The operations to grant on the destination, and why any were left out."""
    if acl.permission == "DENY" or write or acl.resource_type != "TOPIC":
        return (acl.operation,), ""
    if acl.operation == "ALL":
        return READS_TOPIC, f"ALL narrowed to {', '.join(READS_TOPIC)} (acls.write is off: the copies are a replica)"
    if acl.operation in CHANGES_TOPIC:
        return (), f"{acl.operation} left out (acls.write is off: the copies are a replica)"
    return (acl.operation,), ""
