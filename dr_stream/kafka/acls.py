"""ACLs over the admin API, as the plain `Acl` values the mapping rule works on.

Reading a cluster's ACLs needs DESCRIBE on its CLUSTER resource, creating and deleting them
ALTER; a refusal is the one `NotAuthorized` line naming both and what they were for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from enum import Enum
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from dr_stream.core.acl_mapping import Acl
from dr_stream.core.config import ClusterConfig
from dr_stream.kafka.authorization import denied, not_authorized

# The resource types whose ACLs a flow copies.
COPIED = ("TOPIC", "GROUP")


def _binding(acl: Acl) -> AclBinding:
    return AclBinding(ResourceType[acl.resource_type], acl.name, ResourcePatternType[acl.pattern], acl.principal,
                      acl.host, AclOperation[acl.operation], AclPermissionType[acl.permission])


def _acl(b: AclBinding) -> Acl:
    return Acl(_named(b.restype), b.name, _named(b.resource_pattern_type), b.principal, b.host, _named(b.operation),
               _named(b.permission_type))


def _named(member: Enum | str | int) -> str:
    """A described binding's enum member by name (confluent-kafka also types them str or int)."""
    return member.name if isinstance(member, Enum) else str(member)


def _refused(cluster: ClusterConfig, operation: str, purpose: str, exc: KafkaException) -> Exception:
    if denied(exc):
        return not_authorized(cluster.alias, cluster.kafka, operation, "CLUSTER kafka-cluster", purpose)
    return exc


def describe_acls(admin: AdminClient, cluster: ClusterConfig, timeout: float = 15.0) -> set[Acl]:
    """The cluster's topic and group ACLs, literal and prefixed."""
    out: set[Acl] = set()
    for kind in COPIED:
        # None matches any name, principal and host (confluent-kafka's types say str only).
        wanted = AclBindingFilter(ResourceType[kind], None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
                                  AclOperation.ANY, AclPermissionType.ANY)
        try:
            found = admin.describe_acls(wanted, request_timeout=timeout).result(timeout=timeout)
        except KafkaException as exc:
            raise _refused(cluster, "DESCRIBE", "reading its ACLs for acls: sync", exc) from None
        out.update(_acl(b) for b in found)
    return out


def create_acls(admin: AdminClient, cluster: ClusterConfig, acls: Iterable[Acl],
                timeout: float = 15.0) -> dict[Acl, Exception | None]:
    """Each ACL -> None when created (or already there), else its error."""
    bindings = {_binding(a): a for a in sorted(set(acls))}
    if not bindings:
        return {}
    futures = admin.create_acls(list(bindings), request_timeout=timeout)
    return _outcomes(futures, bindings, cluster, "creating ACLs for acls: sync", timeout)


def delete_acls(admin: AdminClient, cluster: ClusterConfig, acls: Iterable[Acl],
                timeout: float = 15.0) -> dict[Acl, Exception | None]:
    """Each ACL -> None when deleted (or already gone), else its error; only that exact ACL goes."""
    filters = {}
    for a in sorted(set(acls)):
        b = _binding(a)
        filters[AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                 b.permission_type)] = a
    if not filters:
        return {}
    futures = admin.delete_acls(list(filters), request_timeout=timeout)
    return _outcomes(futures, filters, cluster, "removing ACLs for acls: sync", timeout)


def _outcomes(futures: Mapping[Any, Future[Any]], acls: Mapping[Any, Acl], cluster: ClusterConfig, purpose: str,
              timeout: float) -> dict[Acl, Exception | None]:
    """Each request's ACL -> None when the cluster did it, else its error (a refusal as one line)."""
    out: dict[Acl, Exception | None] = {}
    for request, future in futures.items():
        try:
            future.result(timeout=timeout)
            out[acls[request]] = None
        except KafkaException as exc:
            out[acls[request]] = _refused(cluster, "ALTER", purpose, exc)
    return out
