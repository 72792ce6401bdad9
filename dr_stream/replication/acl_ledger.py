"""The ACLs a flow created on its destination: the only ones its ACL sync may ever delete.

The ledger is kept in the flow's own state, a Delta table `<checkpoint_dir>/acls` (one row per
creation or removal; the newest row of an ACL says whether the flow holds it), not on a cluster:
whoever could write a ledger could make the flow delete any destination ACL the source does not
map to, and on a cluster a topic's WRITE is granted far more widely than the right to change
ACLs. Only what can write the flow's state (its checkpoints) can write this table, and that can
already change everything the flow does.

A flow of an earlier version kept its ledger in the compacted topic `__dr_stream_acls.<flow>` on
the destination. While the table holds nothing, an entry there is taken over only when it names
an ACL the source maps to now and the destination holds (one the flow could have created);
the rest are said once and left alone, as a forged entry must be.

Invariant: an ACL is in the ledger only after the flow's own create call for it succeeded (or it
passed the takeover above); a removal is recorded after the delete succeeded or when someone
else removed it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from confluent_kafka import TopicPartition

from dr_stream.core.acl_mapping import Acl
from dr_stream.core.config import FlowConfig
from dr_stream.core.contracts import acls_topic, read_acl_key
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.kafka.consumed import offset
from dr_stream.runtime.delta_appends import DeltaAppends, through_spark
from dr_stream.runtime.delta_reads import DeltaReads

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

FIELDS = ("resource_type", "name", "pattern", "principal", "host", "operation", "permission")
# The newest row of each ACL: whether the flow holds it now.
_HELD = (f"SELECT {', '.join(FIELDS)} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY {', '.join(FIELDS)} "
         "ORDER BY recorded_at_ms DESC) AS newest FROM t) AS ranked WHERE newest = 1 AND created")


def schema() -> StructType:
    from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

    return StructType([*(StructField(name, StringType(), False) for name in FIELDS),
                       StructField("created", BooleanType(), False), StructField("recorded_at_ms", LongType(), False)])


def taken_over(recorded: Set[Acl], wanted: Set[Acl], there: Set[Acl]) -> tuple[set[Acl], set[Acl]]:
    """Of an earlier version's ledger: (the entries the flow could have created: wanted now and
    on the destination, the rest)."""
    kept = set(recorded) & set(wanted) & set(there)
    return kept, set(recorded) - kept


@dataclass
class AclLedger:
    config: FlowConfig
    reads: DeltaReads
    appends: DeltaAppends
    spark: Callable[[], SparkSession] | None = None
    _held: set[Acl] | None = field(default=None, repr=False)
    _last_ms: int = field(default=0, repr=False)

    @property
    def path(self) -> str:
        return f"{self.config.streaming.checkpoint_dir.rstrip('/')}/acls"

    def held(self, wanted: Set[Acl], there: Set[Acl], destination: ClusterContext,
             log: Callable[[str], None]) -> set[Acl]:
        """The ACLs the flow created and has not removed; read once, then kept up to date (a state
        without any: what an earlier version recorded on `destination`, `earlier_ledger`)."""
        if self._held is None:
            rows = self.reads.query(self.path, _HELD, latest=True)
            self._held = {Acl(**{name: row[name] for name in FIELDS}) for row in rows}
            [newest] = self.reads.query(self.path, "SELECT MAX(recorded_at_ms) AS newest FROM t", latest=True) or [{}]
            self._last_ms = int(newest.get("newest") or 0)
            if not rows and not self._last_ms:
                self._take_over(wanted, there, destination, log)
        return self._held

    def _take_over(self, wanted: Set[Acl], there: Set[Acl], destination: ClusterContext,
                   log: Callable[[str], None]) -> None:
        topic = acls_topic(self.config.name)
        recorded = earlier_ledger(destination, topic)
        if not recorded:
            return
        kept, left = taken_over(recorded, wanted, there)
        self.record(kept, True)
        log(f"acls: took over {len(kept)} ACL(s) an earlier version recorded in {topic} (wanted and on "
            f"{self.config.destination.alias}); {len(left)} other entr{'y' if len(left) == 1 else 'ies'} there "
            "left alone (not the flow's to delete: that topic could be written by others)")

    def record(self, acls: Set[Acl], created: bool) -> None:
        if not acls:
            return
        # Each row newer than every row before it, so the newest row of an ACL is the last written
        # even within one millisecond.
        now = self._last_ms = max(int(time.time() * 1000), self._last_ms + 1)
        rows = [(*(getattr(a, name) for name in FIELDS), created, now) for a in sorted(acls)]
        self.appends.append(self.path, schema(), rows, lambda: through_spark(self.spark, self.path, schema(), rows))
        held = self._held if self._held is not None else set()
        self._held = held | set(acls) if created else held - set(acls)


def earlier_ledger(destination: ClusterContext, topic: str, timeout: float = 30.0) -> set[Acl]:
    """What an earlier version recorded in `topic` on the destination; empty when it has no such topic."""
    latest: dict[bytes | None, bool] = {}
    deadline = time.monotonic() + timeout
    with destination.consuming("dr-stream-acls", {"enable.partition.eof": True}) as consumer:
        metadata = consumer.list_topics(topic, timeout=timeout)
        if topic not in metadata.topics or metadata.topics[topic].error is not None:
            return set()
        start, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout)
        consumer.assign([TopicPartition(topic, 0, start)])
        position = start
        while position < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{destination.alias}: {topic}: not read to its end ({end}) within "
                                   f"{timeout:g} s; the flow's ACLs are not synced until it is")
            for msg in consumer.consume(num_messages=5000, timeout=1.0):
                if msg.error() is None:
                    position = offset(msg) + 1
                    latest[msg.key()] = msg.value() is not None
    members = (read_acl_key(key) for key, present in latest.items() if present)
    return {Acl(**m) for m in members if m is not None}
