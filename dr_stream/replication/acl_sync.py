"""ACL sync: the destination's topic and group ACLs kept in step with the source's (`acls:`).

Each pass reads both clusters' ACLs, maps the source's (`core.acl_mapping`: never wider than
what the source grants on the copies and the translated groups), creates what the destination
lacks and removes what the flow created there earlier and the source no longer calls for. What
the flow created is recorded in its own state (`acl_ledger`), so that after a restart the flow
still knows its own: an ACL that was on the destination before, or that an operator made there,
is never removed, and no one who can only write to the clusters can make the flow remove one.

Invariants: every ACL created or removed is said on the flow's log; every source ACL left out
or narrowed is said once, with why; a refused call is one line, said again only when it changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING

from confluent_kafka.admin import AdminClient

from dr_stream.core.acl_mapping import Acl, AclMapping, map_acls, own_principal
from dr_stream.core.config import FlowConfig
from dr_stream.kafka.acls import create_acls, delete_acls, describe_acls
from dr_stream.kafka.admin import partition_counts
from dr_stream.kafka.authorization import NotAuthorized
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.kafka.group_offsets.consumer_groups import list_groups
from dr_stream.replication.acl_ledger import AclLedger
from dr_stream.runtime.delta_appends import DeltaAppends
from dr_stream.runtime.delta_reads import DeltaReads

if TYPE_CHECKING:
    from dr_stream.core.config import ClusterConfig



@dataclass(frozen=True)
class AclPass:
    created: tuple[Acl, ...]
    removed: tuple[Acl, ...]
    mapping: AclMapping

    def left_out(self) -> dict[str, int]:
        """The source ACLs not copied as they are, by how: narrowed, unmappable, refused."""
        mapping = self.mapping
        narrowed = sum(1 for acl, why in mapping.left_out if mapping.copied(acl, why))
        return {"narrowed": narrowed, "unmappable": len(mapping.unmappable), "refused": len(mapping.refused)}


def wanted_acls(config: FlowConfig, source: AdminClient) -> AclMapping:
    """The destination ACLs the source's call for now (the drill asks the same)."""
    return map_acls(describe_acls(source, config.source), partition_counts(source), list_groups(source),
                    config.topic_filter, config.group_filter, config.renamer, config.acls.write,
                    own_principal(config.destination.kafka, config.acls.principal))


class AclSync:
    def __init__(self, config: FlowConfig, source: ClusterContext, destination: ClusterContext,
                 log: Callable[[str], None] = print, ledger: AclLedger | None = None,
                 on_pass: Callable[[AclPass], None] = lambda done: None) -> None:
        """`ledger`: the flow's (its Spark and appends for a state deltalake cannot write), else
        one that reads and writes the state through deltalake alone; `on_pass` hears each pass
        that ran to its end (the flow's metrics)."""
        self.config, self.source, self.destination, self.log = config, source, destination, log
        self.on_pass = on_pass
        self.ledger = ledger or AclLedger(config, DeltaReads(None, log), DeltaAppends(log))
        self._said: set[tuple[Acl, str]] = set()
        self._refusal = ""
        principal = own_principal(config.destination.kafka, config.acls.principal)
        if principal is None:
            log(f"acls: the flow's own principal on {config.destination.alias} is not known (no SASL username): "
                "a copied DENY could name it; set acls.principal to the one its broker names")

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.sync_once()
                self._refusal = ""
            except NotAuthorized as exc:
                if str(exc) != self._refusal:
                    self._refusal = str(exc)
                    self.log(f"acls: not synced: {exc}")
            stop.wait(self.config.acls.interval_s)

    def sync_once(self) -> AclPass:
        mapping = wanted_acls(self.config, self.source.admin)
        dst = self.config.destination.alias
        for acl, why in mapping.left_out:
            if (acl, why) not in self._said:
                self._said.add((acl, why))
                self.log(f"acls: {'narrowed' if mapping.copied(acl, why) else 'not copied'} to {dst}: "
                         f"{acl.shown()}: {why}")
        there = describe_acls(self.destination.admin, self.config.destination)
        ours = set(self.ledger.held(mapping.wanted, there, self.destination, self.log))
        created = self._apply(create_acls, mapping.wanted - there, "created on", True)
        removed = self._apply(delete_acls, (ours - mapping.wanted) & there, "removed from", False)
        gone = (ours - mapping.wanted) - there  # removed on the destination by someone else: forgotten
        self.ledger.record(gone, False)
        done = AclPass(created, removed, mapping)
        self.on_pass(done)
        return done

    def _apply(self, call: Callable[[AdminClient, ClusterConfig, Set[Acl]], dict[Acl, Exception | None]],
               acls: Set[Acl], done: str, created: bool) -> tuple[Acl, ...]:
        results = call(self.destination.admin, self.config.destination, acls)
        ok = tuple(sorted(a for a, error in results.items() if error is None))
        self.ledger.record(set(ok), created)
        for acl in ok:
            self.log(f"acls: {done} {self.config.destination.alias}: {acl.shown()}")
        failed = [error for error in results.values() if error is not None]
        if failed:
            raise failed[0]
        return ok
