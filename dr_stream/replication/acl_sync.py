"""ACL sync: the destination's topic and group ACLs kept in step with the source's (`acls:`).

Each pass reads both clusters' ACLs, maps the source's (`core.acl_mapping`), creates what the
destination lacks and removes what the flow created there earlier and the source no longer
has. What the flow created is recorded on the destination in `__dr_stream_acls.<flow>`
(compacted, one record per ACL, a tombstone once removed), so that after a restart the flow
still knows its own: an ACL that was on the destination before, or that an operator made
there, is never removed.

Invariants: every ACL created or removed is said on the flow's log; every source ACL left out
or narrowed is said once, with why; a refused call is one line, said again only when it changes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Set
from dataclasses import asdict, dataclass

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from dr_stream.core.acl_mapping import Acl, AclMapping, map_acls
from dr_stream.core.config import FlowConfig
from dr_stream.core.contracts import acl_key, acls_topic, read_acl_key
from dr_stream.kafka import clients
from dr_stream.kafka.acls import create_acls, delete_acls, describe_acls
from dr_stream.kafka.admin import create_topic, partition_counts
from dr_stream.kafka.authorization import NotAuthorized
from dr_stream.kafka.consumed import offset
from dr_stream.kafka.group_offsets.consumer_groups import list_groups


@dataclass(frozen=True)
class AclPass:
    created: tuple[Acl, ...]
    removed: tuple[Acl, ...]
    mapping: AclMapping


def wanted_acls(config: FlowConfig, source: AdminClient) -> AclMapping:
    """The destination ACLs the source's call for now (the drill asks the same)."""
    return map_acls(describe_acls(source, config.source), partition_counts(source), list_groups(source),
                    config.topic_filter, config.group_filter, config.renamer, config.acls.write)


class AclSync:
    def __init__(self, config: FlowConfig, source: AdminClient, destination: AdminClient,
                 log: Callable[[str], None] = print) -> None:
        self.config, self.source, self.destination, self.log = config, source, destination, log
        self.topic = acls_topic(config.name)
        self._ours: set[Acl] | None = None
        self._said: set[tuple[Acl, str]] = set()
        self._refusal = ""

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
        mapping = wanted_acls(self.config, self.source)
        dst = self.config.destination.alias
        for acl, why in mapping.left_out:
            if (acl, why) not in self._said:
                self._said.add((acl, why))
                self.log(f"acls: {'not copied' if (acl, why) in mapping.unmappable else 'narrowed'} to {dst}: "
                         f"{acl.shown()}: {why}")
        there = describe_acls(self.destination, self.config.destination)
        ours = self._ledger()
        created = self._apply(create_acls, mapping.wanted - there, "created on", True)
        removed = self._apply(delete_acls, (ours - mapping.wanted) & there, "removed from", False)
        gone = (ours - mapping.wanted) - there  # removed on the destination by someone else: forgotten
        if gone:
            self._record(gone, False)
        return AclPass(created, removed, mapping)

    def _apply(self, call, acls: Set[Acl], done: str, created: bool) -> tuple[Acl, ...]:
        results = call(self.destination, self.config.destination, acls)
        ok = tuple(sorted(a for a, error in results.items() if error is None))
        self._record(set(ok), created)
        for acl in ok:
            self.log(f"acls: {done} {self.config.destination.alias}: {acl.shown()}")
        failed = [error for error in results.values() if error is not None]
        if failed:
            raise failed[0]
        return ok

    def _record(self, acls: set[Acl], created: bool) -> None:
        if not acls:
            return
        producer = clients.producer(self.config.destination)
        try:
            for acl in sorted(acls):
                key = acl_key(asdict(acl))
                # the key names the ACL; a value (any) says the flow created it, a tombstone that it removed it
                producer.produce(self.topic, key=key, value=b"created" if created else None)
            unsent = producer.flush(30)
        finally:
            producer.close()
        if unsent:
            raise RuntimeError(f"{self.config.destination.alias}: {self.topic}: the record of the flow's ACLs "
                               "was not written within 30 s")
        if created:
            self._ledger().update(acls)
        else:
            self._ledger().difference_update(acls)

    def _ledger(self) -> set[Acl]:
        """The ACLs the flow created on the destination, read from its topic at the first pass."""
        if self._ours is None:
            if create_topic(self.destination, self.topic, 1, {"cleanup.policy": "compact"}):
                self.log(f"topic {self.topic}: created on {self.config.destination.alias} (compacted)")
            self._ours = _read_ledger(self.config, self.topic)
        return self._ours


def _read_ledger(config: FlowConfig, topic: str, timeout: float = 30.0) -> set[Acl]:
    latest: dict[bytes | None, bool] = {}
    deadline = time.monotonic() + timeout
    with clients.consuming(config.destination, "dr-stream-acls", {"enable.partition.eof": True}) as consumer:
        start, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout)
        consumer.assign([TopicPartition(topic, 0, start)])
        position = start
        while position < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{config.destination.alias}: {topic}: not read to its end ({end}) within "
                                   f"{timeout:g} s; the flow's ACLs are not synced until it is")
            for msg in consumer.consume(num_messages=5000, timeout=1.0):
                if msg.error() is None:
                    position = offset(msg) + 1
                    latest[msg.key()] = msg.value() is not None
    members = (read_acl_key(key) for key, present in latest.items() if present)
    return {Acl(**m) for m in members if m is not None}
