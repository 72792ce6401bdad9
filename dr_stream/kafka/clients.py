"""The one place that builds confluent-kafka clients for a cluster of the flow.

Every admin client, consumer and producer the driver opens comes from here, built from the
cluster's config by `client_properties`. That function is where librdkafka's settings are
derived from the flow's client properties, so a change to how a cluster is reached (security,
timeouts) is made once and reaches every client.

Invariants: callers name what they need a client for (a consumer's group, extra settings);
a consumer or producer opened with `consuming`/`producing` is closed when the block ends,
whatever happens inside it. Every client logs through `client_log`, never straight to stderr.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from dr_stream.config import ClusterConfig
from dr_stream.kafka.client_log import client_log

Settings = Mapping[str, str | int | bool]

# A probe must answer quickly whether the cluster is there; librdkafka would otherwise keep
# retrying the connection for its default socket timeout of a minute.
PROBE_SETTINGS: Settings = {"socket.connection.setup.timeout.ms": "5000"}


def client_properties(cluster: ClusterConfig) -> dict[str, str]:
    """The librdkafka properties of `cluster`: its bootstrap servers and its `kafka:` properties."""
    return {"bootstrap.servers": cluster.bootstrap_servers, **cluster.kafka}


def _config(cluster: ClusterConfig, settings: Settings | None) -> dict:
    return {**client_properties(cluster), **(settings or {}), "logger": client_log(cluster.alias)}


def admin(cluster: ClusterConfig, settings: Settings | None = None) -> AdminClient:
    return AdminClient(_config(cluster, settings))


def consumer(cluster: ClusterConfig, group: str, settings: Settings | None = None) -> Consumer:
    """A consumer that never commits on its own: dr-stream only ever reads positions it assigns."""
    return Consumer(_config(cluster, {"group.id": group, "enable.auto.commit": False, **(settings or {})}))


def producer(cluster: ClusterConfig, settings: Settings | None = None) -> Producer:
    return Producer(_config(cluster, settings))


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


def reachable_cluster_id(cluster: ClusterConfig, timeout: float = 5.0) -> str | None:
    """The cluster's cluster.id when it answers within `timeout`, else None (the probe failover
    and status use to decide between live positions and recorded ones)."""
    try:
        client = admin(cluster, PROBE_SETTINGS)
        return client.describe_cluster(request_timeout=timeout).result(timeout=timeout).cluster_id
    except Exception:
        return None
