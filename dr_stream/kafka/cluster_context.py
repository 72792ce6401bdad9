"""One cluster as a flow or a command meets it, and the pair a flow joins.

A `ClusterContext` holds what every part of a flow or a command asks of a cluster: its alias and
Java client properties, its cluster.id (learned once, by one probe), one admin client and one
group-offsets face (`group_offsets.consumer_groups.ConsumerGroupOffsets`, on that admin) and one
record reader (a consumer that never joins a group, lent to each look-up in turn). The parts take
them from the context instead of building their own, so a command opens at most one client of
each kind per cluster, and a cluster's id is asked once however many parts need it. The one
exception is a group's offsets: librdkafka reads and commits them only through a consumer of
that group, so a command opens one such consumer per group of a small round; a round of many
groups goes to the group-offsets face's one helper JVM instead (`consumer_groups.BATCHED_FROM`).

A part that needs a client to itself (a loop's producer, a consumer tailing a topic on the
loop's own thread, where the shared reader would be lent to two threads at once; a loop's own
groups client) asks the context for one (`producer`, `consumer`, `consuming`, `groups_client`,
`java_groups`): product code outside the kafka wing builds no client of its own, so how a
cluster is reached and which client stack serves it are decided here and in `clients`.

Invariants: constructing a context connects to nothing; each shared client is built at first
use and at most once; a client asked for to oneself is its asker's to close; `close` closes the
shared clients the context opened (never one a part was handed by someone else), and a closed
context opens nothing more.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from dr_stream.core.config import ClusterConfig, FlowConfig
from dr_stream.kafka import clients
from dr_stream.kafka.group_offsets import GroupOffsetsClient
from dr_stream.kafka.group_offsets.consumer_groups import ConsumerGroupOffsets
from dr_stream.kafka.group_offsets.java_admin import GroupOffsets
from dr_stream.kafka.group_offsets.kafka4 import Kafka4Groups
from dr_stream.kafka.group_offsets.stacks import group_offsets_stack
from dr_stream.kafka.reachability import reachable_cluster_id, reachable_cluster_ids, require_cluster_id
from dr_stream.runtime.recorded_clusters import RecordedClusters

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_UNASKED: Any = object()


class ClusterContext:
    def __init__(self, config: ClusterConfig, helper: Kafka4Groups | None = None,
                 check: Callable[[str], None] | None = None) -> None:
        self.config = config
        # the Kafka 4 helper the group-offsets face sends rounds of many groups to: one shared with
        # the other cluster of a pair (`FlowClusters`, which stops it), else one of the face's own
        self._helper = helper
        # told each cluster.id the cluster answers with before anyone else hears it; raises to
        # refuse it (`FlowClusters`: the id the flow's state recorded, `recorded_clusters`)
        self._check = check
        self._lock = threading.Lock()
        self._cluster_id: str | None = None
        self._reached: str | None = _UNASKED
        self._admin: AdminClient | None = None
        self._group_offsets: ConsumerGroupOffsets | None = None
        self._reader = clients.OnDemandConsumer(config, "dr-stream-reader", clients.READER_SETTINGS)
        self._closed = False

    @property
    def alias(self) -> str:
        return self.config.alias

    def java_properties(self) -> dict[str, str]:
        return self.config.java_properties()

    def cluster_id(self) -> str:
        """The cluster.id of a cluster the caller cannot do without: ClusterAccessError (one line
        naming the cluster and why) when it does not answer or refuses dr-stream."""
        with self._lock:
            if self._cluster_id is None:
                self._cluster_id = self._checked(require_cluster_id(self.config))
            return self._cluster_id

    def reachable_id(self) -> str | None:
        """The cluster.id, or None when the cluster does not answer (a source that is gone); asked
        once, so every part of a command sees the same answer."""
        with self._lock:
            if self._cluster_id is not None:
                return self._cluster_id
            if self._reached is _UNASKED:
                found = reachable_cluster_id(self.config)
                self._reached = found if found is None else self._checked(found)
            return self._reached

    def reached(self, cluster_id: str | None) -> None:
        """What a probe of this cluster found (`FlowClusters.unreachable` probes both at once)."""
        with self._lock:
            self._reached = cluster_id if cluster_id is None else self._checked(cluster_id)

    def _checked(self, cluster_id: str) -> str:
        """`cluster_id` once the check took it; what the check raises otherwise (nothing is kept,
        so a later ask probes and is refused again)."""
        if self._check is not None:
            self._check(cluster_id)
        return cluster_id

    @property
    def admin(self) -> AdminClient:
        with self._lock:
            self._open()
            if self._admin is None:
                self._admin = clients.admin(self.config)
            return self._admin

    @property
    def group_offsets(self) -> GroupOffsetsClient:
        """The groups' states and offsets through librdkafka, on this context's admin client."""
        with self._lock:
            self._open()
            if self._group_offsets is None:
                self._group_offsets = ConsumerGroupOffsets(self.config, admins=self, helper=self._helper)
            return self._group_offsets

    def reader(self) -> clients.LentConsumer:
        """The cluster's one record reader, lent to a step: it assigns what it reads, and its
        `close` leaves the reader to the context."""
        self._still_open()
        return clients.LentConsumer(self._reader)

    def producer(self, settings: clients.Settings | None = None) -> Producer:
        """A producer of the asker's own (it flushes and closes it): an idempotent one
        (`clients.producer`), with `settings` over the cluster's."""
        self._still_open()
        return clients.producer(self.config, settings)

    def consumer(self, group: str, settings: clients.Settings | None = None) -> clients.OnDemandConsumer:
        """A consumer of the asker's own, opened at its first use (so a part holding one can be built
        without connecting) and closed by the asker: for a loop that reads on a thread of its own."""
        self._still_open()
        return clients.OnDemandConsumer(self.config, group, settings)

    @contextmanager
    def consuming(self, group: str, settings: clients.Settings | None = None) -> Iterator[Consumer]:
        """A consumer of the asker's own for one block, closed when the block ends."""
        self._still_open()
        with clients.consuming(self.config, group, settings) as consumer:
            yield consumer

    def groups_client(self, timeout_s: float = 15.0, batched: bool = False) -> GroupOffsetsClient:
        """A groups client of the asker's own, which it closes: `batched`, the Java admin client in
        this process's Spark driver (one request per coordinator however many groups: a loop's),
        else librdkafka (`group_offsets.stacks`)."""
        self._still_open()
        return group_offsets_stack(self.config, timeout_s, batched)

    def java_groups(self, timeout_s: float = 15.0) -> GroupOffsets:
        """The Java admin client in this process's Spark driver, the asker's to close: for a loop
        that also lists groups and fetches only what changed (`positions.committed_positions`)."""
        self._still_open()
        return clients.group_offsets(self.config, timeout_s)

    def discard(self, admin: AdminClient | None) -> None:
        """Drops this admin client: the next `admin` builds a new one (a client whose describe
        timed out must go, `ConsumerGroupOffsets.states`)."""
        with self._lock:
            if admin is None or admin is self._admin:
                self._admin = None

    def _still_open(self) -> None:
        """Refuses a closed context, for an ask that takes no shared client."""
        with self._lock:
            self._open()

    def _open(self) -> None:
        if self._closed:
            raise RuntimeError(f"cluster {self.alias}: its context is closed")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            offsets, self._group_offsets, self._admin = self._group_offsets, None, None
        if offsets is not None:
            offsets.close()
        self._reader.close()

    def __enter__(self) -> ClusterContext:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


@dataclass
class FlowClusters:
    """A flow's two clusters, each with its context; a context manager that closes both. The two
    share one Kafka 4 helper (started only if a round of many groups asks for it): a drill reads
    the source's groups and then the destination's, and a second JVM would start again."""

    source: ClusterContext
    destination: ClusterContext
    config: FlowConfig = field(repr=False)
    helper: Kafka4Groups | None = field(default=None, repr=False)

    @classmethod
    def of(cls, config: FlowConfig, spark: Callable[[], SparkSession] | None = None,
           unchecked: Collection[str] = ()) -> FlowClusters:
        """Both clusters, each checked against the cluster.id the flow's state recorded for it
        (`recorded_clusters`, read through `spark` where `deltalake` cannot; a command's own
        session when None) as soon as it answers, except the roles in `unchecked` (a cluster
        being restored from scratch)."""
        helper = Kafka4Groups([config.source, config.destination])
        recorded = RecordedClusters.of(config, spark)

        def check(role: str, cluster: ClusterConfig) -> Callable[[str], None] | None:
            return None if role in unchecked else lambda found: recorded.check(role, cluster.alias, found)

        return cls(ClusterContext(config.source, helper, check("source", config.source)),
                   ClusterContext(config.destination, helper, check("destination", config.destination)),
                   config, helper)

    def unreachable(self) -> list[str]:
        """The aliases of the clusters that do not answer, both probed at once (one that refuses
        dr-stream raises ClusterAccessError); each context keeps its answer."""
        found = reachable_cluster_ids([self.source.config, self.destination.config])
        for context, cluster_id in zip((self.source, self.destination), found, strict=True):
            context.reached(cluster_id)
        return [c.alias for c, cluster_id in zip((self.source, self.destination), found, strict=True)
                if cluster_id is None]

    def distinct_ids(self) -> tuple[str, str]:
        """Both cluster.ids; ValueError when the two are one cluster (a flow would copy onto its source)."""
        source, destination = self.source.cluster_id(), self.destination.cluster_id()
        if source == destination:
            raise ValueError(f"{self.config.path}: source and destination are the same cluster ({source})")
        return source, destination

    def close(self) -> None:
        self.source.close()
        self.destination.close()
        if self.helper is not None:
            self.helper.close()

    def __enter__(self) -> FlowClusters:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
