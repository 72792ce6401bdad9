"""Consumer groups on one cluster: who they are, where they stand, whether they are running.

`ConsumerGroupOffsets` is the Spark-free twin of `java_admin.GroupOffsets` (the flow's Java
client, batched per coordinator): the same calls with the same answers, for the commands, which
must answer in about a second and start no Spark. Callers hold either one and take the same path.

A group's offsets are read and written through a consumer of that group, never the admin API:
librdkafka's admin ListConsumerGroupOffsets (and its OffsetCommit twin) handle a NOT_COORDINATOR
answer by asking the client's consumer-group handle to find the coordinator again, and an admin
client has none, so the process dies on a NULL pointer (librdkafka issue 5040). That answer
comes whenever a coordinator moves: a fresh cluster loading `__consumer_offsets`, a broker
restarting. Through a consumer the same answer is an ordinary retriable error, which the
consumer (`retrying_clients`) asks again until the coordinator settles. The consumer never
joins the group.

A consumer per group is cheap for a few groups and dear for many: two connections each, and on
a secured cluster their TLS handshakes and SCRAM exchanges (300 groups took 7-10 s and 7.5
CPU-seconds on SASL_SSL here). A round of `BATCHED_FROM` groups or more goes to the Kafka 4 helper
instead (`kafka4.BatchedConsumerGroups`: the flow's own batched Java client, a JVM that starts in
well under a second and fetches all the groups a coordinator holds in one request); where the
helper cannot run (no JDK on the host), the consumers serve it, and that is said once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from dr_stream.core.config import ClusterConfig
from dr_stream.failure_notes import first_line
from dr_stream.kafka import clients
from dr_stream.kafka.authorization import denied, not_authorized
from dr_stream.kafka.clients import consuming
from dr_stream.kafka.group_offsets.answers import Committed, Fetched, Partition, group_state
from dr_stream.kafka.group_offsets.kafka4 import BatchedConsumerGroups, Kafka4Groups

T = TypeVar("T")
_ANSWER_GRACE_S = 2.0


def list_groups(admin: AdminClient, timeout: float = 15.0) -> list[str]:
    result = admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout)
    return sorted(g.group_id for g in result.valid)


def committed_offsets(cluster: ClusterConfig, group: str, partitions: Iterable[tuple[str, int]],
                      timeout: float = 15.0) -> dict[tuple[str, int], Committed]:
    """The group's committed offsets among `partitions` (those it has no offset for are left out)."""
    with consuming(cluster, group) as consumer:
        return read_committed(consumer, cluster, group, partitions, timeout)


def read_committed(consumer: Consumer, cluster: ClusterConfig, group: str, partitions: Iterable[tuple[str, int]],
                   timeout: float = 15.0) -> dict[tuple[str, int], Committed]:
    """`committed_offsets` through a consumer of the group the caller already holds."""
    wanted = [TopicPartition(t, p) for t, p in sorted(set(partitions))]
    if not wanted:
        return {}

    def read() -> list[TopicPartition]:
        try:
            return consumer.committed(wanted, timeout=timeout)
        except KafkaException as exc:
            if denied(exc):
                raise not_authorized(cluster.alias, cluster.kafka, "DESCRIBE", f"GROUP {group}",
                                     "reading its committed offsets") from None
            raise

    found, unreadable = committed_readably(read)
    if unreadable:
        logging.getLogger(__name__).warning(
            f"{cluster.alias}: group {group}: the metadata of the committed offsets of {_listed(unreadable)} did not "
            f"decode in {METADATA_READS} reads; those offsets are taken as a consumer's own")
    return found


# librdkafka keeps a fetched metadata as bytes and a length, and confluent-kafka-python reads it as
# a C string, on past its end to the first NUL in memory: metadata a writer did not end with a NUL
# comes back with bytes the broker never sent, and may not decode. dr-stream's own commits end
# with one (librdkafka puts it there; the Java client's `GroupOffsets` adds it), so this is left
# for other writers' metadata (a Java application's, a commit from before that rule): it is read
# again, and after this many reads kept as `UNREADABLE_METADATA`, which is never taken for
# dr-stream's own commit (the flow the other way would otherwise never report a consumer's real
# position).
METADATA_READS = 3
UNREADABLE_METADATA = "\ufffd"


def committed_readably(read: Callable[[], Iterable[Any]]
                       ) -> tuple[dict[tuple[str, int], Committed], list[tuple[str, int]]]:
    """The committed offsets `read` returns (a list of TopicPartition), read again while a
    metadata does not decode, up to `METADATA_READS` reads; and the partitions whose metadata
    never did."""
    for _ in range(METADATA_READS):
        got = {(tp.topic, tp.partition): (tp.offset, _metadata(tp)) for tp in read()
               if tp.offset >= 0 and tp.error is None}
        unreadable = sorted(key for key, (_, metadata) in got.items() if metadata is None)
        if not unreadable:
            break
    return ({key: Committed(offset, UNREADABLE_METADATA if metadata is None else metadata)
             for key, (offset, metadata) in got.items()}, unreadable)


def _metadata(tp: TopicPartition) -> str | None:
    try:
        return tp.metadata or ""
    except UnicodeDecodeError:
        return None


def _listed(partitions: list[tuple[str, int]]) -> str:
    shown = ", ".join(f"{t}[{p}]" for t, p in partitions[:5])
    return shown + (f" and {len(partitions) - 5} more" if len(partitions) > 5 else "")


def group_states(admin: AdminClient, groups: Iterable[str],
                 timeout: float = 15.0) -> dict[str, tuple[str, int] | Exception]:
    """(state, member count) of many groups in one request per coordinator (a group the cluster
    does not know is ("ABSENT", 0)); a group whose description failed maps to its error."""
    groups = sorted(set(groups))
    if not groups:
        return {}
    futures = admin.describe_consumer_groups(groups, request_timeout=timeout)
    return {group: _described(group, future, timeout) for group, future in futures.items()}


def authorized_operations(admin: AdminClient, groups: Iterable[str],
                          timeout: float = 15.0) -> dict[str, set[str] | Exception]:
    """The operations the client's principal may perform on each group ("READ", "DESCRIBE", ...),
    as its broker's authorizer answers; a group whose description failed maps to its error."""
    groups = sorted(set(groups))
    if not groups:
        return {}
    futures = admin.describe_consumer_groups(groups, include_authorized_operations=True, request_timeout=timeout)
    out: dict[str, set[str] | Exception] = {}
    for group, future in futures.items():
        try:
            described = future.result(timeout=timeout + _ANSWER_GRACE_S)
            out[group] = {op.name for op in described.authorized_operations or ()}
        except KafkaException as exc:
            exc.__traceback__ = None  # see _described
            out[group] = exc
    return out


def _described(group: str, future: Future[Any], timeout: float) -> tuple[str, int] | Exception:
    try:
        # librdkafka ends the request itself at `timeout` with the broker's last answer
        # (COORDINATOR_NOT_AVAILABLE, ...); waiting a little longer lets that answer through.
        return _state(future.result(timeout=timeout + _ANSWER_GRACE_S))
    except KafkaException as exc:
        # The future keeps this error, and its traceback our frames up to the caller's: a cycle
        # only the garbage collector would break, keeping the admin client alive meanwhile (see
        # GroupSync.states for why that client must go at once).
        exc.__traceback__ = None
        if "GROUP_ID_NOT_FOUND" in str(exc):
            return "ABSENT", 0
        if _code(exc) != KafkaError._TIMED_OUT:
            return exc
    except TimeoutError:
        pass
    return _unanswered(group, timeout)


def _unanswered(group: str, timeout: float) -> TimeoutError:
    # librdkafka keeps asking while a coordinator is unavailable or moving, then says only
    # "Local: Timed out"; the operator needs to know which request waited on what.
    return TimeoutError(f"group {group}: no coordinator answered its describe within {timeout:g} s")


def _code(exc: KafkaException) -> int | None:
    return exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None


def _state(described: Any) -> tuple[str, int]:
    return group_state(described.state.name if described.state is not None else "UNKNOWN",
                       len(described.members or []))


def commit_offsets(cluster: ClusterConfig, group: str, offsets: dict[tuple[str, int], int], metadata: str,
                   timeout: float = 15.0) -> None:
    """Commits as the group without joining it: the broker accepts this only while the group has
    no members, which is also the only time dr-stream writes a group."""
    with consuming(cluster, group, {"socket.timeout.ms": int(timeout * 1000)}) as consumer:
        write_committed(consumer, cluster, group, offsets, metadata)


def write_committed(consumer: Consumer, cluster: ClusterConfig, group: str, offsets: dict[tuple[str, int], int],
                    metadata: str) -> None:
    """`commit_offsets` through a consumer of the group the caller already holds (a coordinator
    that moves meanwhile is waited out by the consumer itself, `retrying_clients`)."""
    partitions = [TopicPartition(t, p, o, metadata=metadata) for (t, p), o in sorted(offsets.items())]
    try:
        result = consumer.commit(offsets=partitions, asynchronous=False)
        failed = [tp for tp in result or [] if tp.error is not None]
        if failed:
            raise KafkaException(failed[0].error)
    except KafkaException as exc:
        if denied(exc):
            raise not_authorized(cluster.alias, cluster.kafka, "READ", f"GROUP {group}",
                                 "committing offsets to it") from None
        raise


def delete_group(admin: AdminClient, group: str, timeout: float = 15.0) -> bool:
    """Deletes the group when the cluster has it; False when it did not."""
    if group not in list_groups(admin, timeout):
        return False
    admin.delete_consumer_groups([group], request_timeout=timeout)[group].result(timeout=timeout)
    return True


# Groups read or committed at once: each is a consumer of its own, mostly waiting on its coordinator.
PARALLEL = 16
# A round of this many groups or more goes through the Kafka 4 helper's batched Java client: a
# consumer costs about 25 ms of CPU on SASL_SSL, the helper's start about a second.
BATCHED_FROM = 32


def _each(groups: list[str], call: Callable[[str], T]) -> dict[str, T]:
    if len(groups) <= 1:
        return {group: call(group) for group in groups}
    with ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="group-offsets") as pool:
        return dict(zip(groups, pool.map(call, groups), strict=True))


class ConsumerGroupOffsets:
    """Many groups' states and offsets through librdkafka: `GroupOffsets`' calls without a JVM.

    States come from one describe per coordinator; offsets from a consumer of each group,
    `PARALLEL` groups at a time, for the partitions named (librdkafka reads no other way), or,
    for a round of `BATCHED_FROM` groups or more, from the Kafka 4 helper (`batched`), started at
    the first such round or ahead of it (`expect`) and stopped at `close`.
    Invariant: like the Java client, a group whose read or commit failed maps to its error,
    never to "no offsets"."""

    def __init__(self, cluster: ClusterConfig, timeout_s: float = 15.0, admins: Admins | None = None,
                 helper: Kafka4Groups | None = None) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s
        # the cluster's admin client: its context's (`cluster_context`), or one of its own
        self._admins = admins if admins is not None else OwnAdmin(cluster)
        # the helper: one that serves this cluster among others (a command's pair of clusters
        # shares one JVM, `FlowClusters`) and is its giver's to stop, or one of its own
        self._helper: Kafka4Groups | None = helper
        self._own_helper = helper is None
        # why the helper cannot serve this cluster, once a start failed: the consumers do
        self._no_helper: str | None = None

    def expect(self, groups: int) -> None:
        """A round of `groups` groups is coming: the helper starts now if it will serve it."""
        if groups >= BATCHED_FROM and self._no_helper is None:
            self._helper_groups().groups.start_soon()

    def _helper_groups(self) -> BatchedConsumerGroups:
        if self._helper is None:
            self._helper = Kafka4Groups([self.cluster], self.timeout_s)
        return BatchedConsumerGroups(self._helper, self.cluster)

    def _batched(self, groups: int) -> BatchedConsumerGroups | None:
        return self._helper_groups() if groups >= BATCHED_FROM and self._no_helper is None else None

    def _without_helper(self, exc: Exception, groups: int) -> None:
        """The helper did not start or answer: this round and the next go through consumers."""
        self._no_helper = str(exc)
        logging.getLogger(__name__).warning(
            f"{self.cluster.alias}: {groups} groups' offsets go through a consumer each, slower than one batched "
            f"request: the Kafka 4 helper did not serve them ({first_line(exc)})")

    @property
    def admin(self) -> AdminClient:
        return self._admins.admin

    def list_groups(self) -> list[str]:
        return list_groups(self.admin, self.timeout_s)

    def states(self, groups: list[str]) -> dict[str, tuple[str, int] | Exception]:
        """Each group's (state, members). A client whose describe timed out is dropped for a new
        one: librdkafka (2.16) keeps that request's coordinator look-up alive, and when the
        connection comes back it completes a request already freed and aborts the whole process
        (librdkafka issue 4605); destroying the client ends the look-up safely."""
        admin = self.admin
        found = group_states(admin, groups, self.timeout_s)
        if any(isinstance(v, TimeoutError) for v in found.values()):
            self._admins.discard(admin)
        return found

    def committed(self, groups: list[str], partitions: Iterable[Partition] | None = None) -> dict[str, Fetched]:
        """Each group's committed offsets among `partitions` (librdkafka reads only named ones)."""
        if partitions is None:
            raise ValueError("librdkafka reads a group's committed offsets only for partitions it is given")
        wanted = sorted(set(partitions))
        if (batched := self._batched(len(groups))) is not None:
            try:
                found = batched.committed(list(groups), wanted)
            except Exception as exc:  # no JDK, no jar, or a helper that did not answer
                self._without_helper(exc, len(groups))
            else:  # the Java client reads every partition of a group: those asked, as librdkafka
                asked = set(wanted)
                return {g: f if isinstance(f, Exception) else {k: c for k, c in f.items() if k in asked}
                        for g, f in found.items()}

        def one(group: str) -> Fetched:
            try:
                return committed_offsets(self.cluster, group, wanted, self.timeout_s)
            except Exception as exc:  # this group's coordinator, or its ACL: the others go on
                return exc

        return _each(list(groups), one)

    def commit(self, offsets: Mapping[str, Mapping[Partition, int]], metadata: str) -> dict[str, Exception]:
        """Commits every group's offsets with `metadata`; the groups that failed, with why."""
        if (batched := self._batched(len(offsets))) is not None:
            try:
                return batched.commit(offsets, metadata)
            except Exception as exc:  # as in `committed`: the consumers commit them instead
                self._without_helper(exc, len(offsets))

        def one(group: str) -> Exception | None:
            try:
                commit_offsets(self.cluster, group, dict(offsets[group]), metadata, self.timeout_s)
                return None
            except Exception as exc:  # e.g. the group gained members since it was described
                return exc

        return {g: exc for g, exc in _each(sorted(offsets), one).items() if exc is not None}

    def close(self) -> None:
        if self._helper is not None and self._own_helper:
            self._helper.close()
            self._helper = None
        if isinstance(self._admins, OwnAdmin):
            self._admins.discard(None)


class Admins(Protocol):
    """Where an admin client comes from: `admin` builds one at first use, `discard` drops it
    (the next `admin` builds a new one) when it is the one given."""

    @property
    def admin(self) -> AdminClient: ...

    def discard(self, admin: AdminClient | None) -> None: ...


class OwnAdmin:
    """An admin client of one's own, built at first use."""

    def __init__(self, cluster: ClusterConfig) -> None:
        self.cluster = cluster
        self._admin: AdminClient | None = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = clients.admin(self.cluster)
        return self._admin

    def discard(self, admin: AdminClient | None) -> None:
        if admin is None or admin is self._admin:
            self._admin = None
