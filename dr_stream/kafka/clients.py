"""The one place that builds Kafka clients for a cluster of the flow.

Every admin client, consumer and producer the driver opens comes from here, built from the
cluster's config by `client_properties`. That function is where librdkafka's settings are
derived from the flow's client properties, so a change to how a cluster is reached (security,
timeouts) is made once and reaches every client. `group_offsets` builds the one Java client:
an admin client in the Spark driver's JVM, from the same Java properties as the user wrote
them, for the control loops' batched group offsets (`kafka/group_offsets`).

Every admin client and consumer is a `retrying_clients` one: its admin, metadata, offsets and
group calls are sent again while the cluster answers with a retriable error (a broker restarting,
leadership moving), within the time the caller gave the call. A reachability probe is the
exception: its job is to tell at once whether a cluster answers.

Invariants: callers name what they need a client for (a consumer's group, extra settings);
a consumer or producer opened with `consuming`/`producing` is closed when the block ends,
whatever happens inside it. Every client logs through `client_log`, never straight to stderr.
Every admin client is destroyed on a thread of dr-stream's, never on librdkafka's own
(`released_clients`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from dr_stream.core.config import ClusterConfig
from dr_stream.core.librdkafka_settings import ClientSettingsError, derive
from dr_stream.kafka.client_log import client_log
from dr_stream.kafka.group_offsets.java_admin import GroupOffsets
from dr_stream.kafka.released_clients import ReleasedOnOwnThread
from dr_stream.kafka.retrying_clients import RetryingAdmin, RetryingConsumer
from dr_stream.kafka.truststores import read_truststore

Settings = Mapping[str, object]

# A probe must answer quickly whether the cluster is there; librdkafka would otherwise keep
# retrying the connection for its default socket timeout of a minute.
PROBE_SETTINGS: Settings = {"socket.connection.setup.timeout.ms": "5000"}

# `Consumer.consume(num_messages, timeout)` returns early only when the batch is full: a read that
# must stop at a log end calls it with this short wait in a loop under its own deadline, or it
# would sit out the whole timeout after the last record.
CONSUME_WAIT_S = 0.05


# librdkafka settings naming a file, and the Java property the user wrote it under.
_FILES = {"ssl.ca.location": "ssl.truststore.location", "ssl.keystore.location": "ssl.keystore.location",
          "ssl.certificate.location": "ssl.keystore.location", "ssl.key.location": "ssl.keystore.location"}


def client_properties(cluster: ClusterConfig) -> dict[str, str]:
    """The librdkafka settings of `cluster`: its bootstrap servers and what `derive` makes of its
    Java client properties, with its `librdkafka:` map on top. A file that is not there, or
    settings that cannot be derived, raise one ConfigError naming the file, cluster and key."""
    try:
        settings = derive(cluster.kafka, cluster.librdkafka, read_truststore)
    except ClientSettingsError as exc:
        raise cluster.fail(f"kafka.{exc.key}", exc.message) from None
    for setting, java_key in _FILES.items():
        path = settings.get(setting)
        if path and not os.path.isfile(path):
            raise cluster.fail(f"kafka.{java_key}", f"{path}: no such file")
    return {"bootstrap.servers": cluster.bootstrap_servers, **settings}


def _config(cluster: ClusterConfig, settings: Settings | None) -> dict[str, Any]:
    return {**client_properties(cluster), **(settings or {}), "logger": client_log(cluster.alias)}


@contextmanager
def _refusals_reported(cluster: ClusterConfig) -> Iterator[None]:
    """librdkafka refusing the settings at construction (a keystore it cannot open) is one ConfigError."""
    try:
        yield
    except KafkaException as exc:
        raise cluster.fail("kafka", f"dr-stream's client refused the derived settings: {exc.args[0].str()}") from None


def group_offsets(cluster: ClusterConfig, timeout_s: float = 15.0) -> GroupOffsets:
    """A Java admin client in this process's Spark driver, built from the cluster's Java client
    properties exactly as the flow wrote them; the caller closes it."""
    from dr_stream.runtime.jvm_classes import jvm_view  # the driver's JVM: a command without Spark never loads it

    java = jvm_view().io.drstream.kafka.GroupOffsets(cluster.java_properties(), int(timeout_s * 1000))
    return GroupOffsets(cluster, java, timeout_s)


def admin(cluster: ClusterConfig, settings: Settings | None = None) -> AdminClient:
    with _refusals_reported(cluster):
        return RetryingAdmin(_config(cluster, settings), cluster.alias)


def consumer(cluster: ClusterConfig, group: str, settings: Settings | None = None) -> Consumer:
    """A consumer that never commits on its own: dr-stream only ever reads positions it assigns."""
    with _refusals_reported(cluster):
        return RetryingConsumer(_config(cluster, {"group.id": group, "enable.auto.commit": False, **(settings or {})}),
                                cluster.alias)


def producer(cluster: ClusterConfig, settings: Settings | None = None) -> Producer:
    """An idempotent producer, as Kafka's Java client is by default: without it librdkafka
    retries a batch refused for a moment (NOT_LEADER_OR_FOLLOWER on a topic just created or a
    leader just moved) after the batches sent behind it, so records land out of order: a
    group's older commit in `__consumer_timestamps` after its newer one."""
    with _refusals_reported(cluster):
        return Producer(_config(cluster, {"enable.idempotence": True, **(settings or {})}))


def probe_admin(cluster: ClusterConfig, on_error: Callable[[KafkaError], None]) -> AdminClient:
    """A dedicated admin client whose error events reach `on_error` (served by its `poll`); the
    caller destroys it (`__exit__`) in its own thread when done."""
    with _refusals_reported(cluster):
        return _ProbeAdmin(_config(cluster, {**PROBE_SETTINGS, "error_cb": on_error}))


class _ProbeAdmin(ReleasedOnOwnThread, AdminClient):
    """A plain admin client (no retries), released as every other one (`released_clients`)."""


@contextmanager
def consuming(cluster: ClusterConfig, group: str, settings: Settings | None = None) -> Iterator[Consumer]:
    client = consumer(cluster, group, settings)
    try:
        yield client
    finally:
        client.close()


@contextmanager
def producing(cluster: ClusterConfig, settings: Settings | None = None,
              flush_timeout: float = 30.0) -> Iterator[Producer]:
    """A producer whose records are flushed, then closed, when the block ends."""
    client = producer(cluster, settings)
    try:
        yield client
        client.flush(flush_timeout)
    finally:
        client.close()


class OnDemandConsumer:
    """A consumer opened at its first use and closed by `close`, so a part that may need one can be
    built, wired and tested without connecting anywhere."""

    def __init__(self, cluster: ClusterConfig, group: str, settings: Settings | None = None) -> None:
        self.cluster, self.group, self.settings = cluster, group, settings
        self._client: Consumer | None = None

    @property
    def opened(self) -> bool:
        return self._client is not None

    def get(self) -> Consumer:
        if self._client is None:
            self._client = consumer(self.cluster, self.group, self.settings)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class LentConsumer:
    """Another's on-demand consumer, used as one's own for a while (a command's one reader of a
    cluster, `cluster_context`): `get` opens it, `close` leaves it open for its owner and only
    drops the partitions the borrower assigned. A borrower assigns what it reads each time."""

    def __init__(self, owner: OnDemandConsumer) -> None:
        self.owner = owner

    @property
    def opened(self) -> bool:
        return self.owner.opened

    def get(self) -> Consumer:
        return self.owner.get()

    def close(self) -> None:
        if self.owner.opened:
            self.owner.get().unassign()


# Settings of a command's one reader per cluster: it serves every look-up that reads records at
# known offsets (runs, a destination's tail, record timestamps, returned records), each of which
# ends at a partition's end and must not wait out the broker's 500 ms fetch wait there.
READER_SETTINGS: Settings = {"enable.partition.eof": True, "fetch.wait.max.ms": 10,
                             "isolation.level": "read_committed", "auto.offset.reset": "earliest"}

