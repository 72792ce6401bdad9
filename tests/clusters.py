"""How the suite's KRaft clusters start, and what a flow's principal needs on a secured one."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from dr_stream.dev.clusters import LocalCluster

# `make test TEST_WORKERS=N` runs the suite's modules on N pytest-xdist workers, each with its own
# session clusters. Every port a test starts something on goes through `worker_port`: the test
# ports are all 92 mod 100 and a cluster reaches at most CLUSTER_REACH ports above its own (three
# nodes, 10 apart, each with its controller next to it), so shifting each worker by 25 keeps every
# worker's ports apart from every other's, for up to four workers, and below the ephemeral range
# that starts at 32768 (tests/test_worker_ports.py checks it).
WORKER_PORT_STEP = 25
MAX_WORKERS = 4
CLUSTER_REACH = 21


def worker_index() -> int:
    """This pytest-xdist worker's number (gw0 is 0), 0 when the suite runs in one process."""
    import os

    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(name.removeprefix("gw"))
    if index >= MAX_WORKERS:
        raise RuntimeError(f"pytest-xdist worker {name}: the test ports are laid out for at most {MAX_WORKERS} "
                           "workers (tests/clusters.py)")
    return index


def worker_port(port: int) -> int:
    """`port`, moved into this worker's share of the test ports."""
    return port + WORKER_PORT_STEP * worker_index()


def started_cluster(home: Path, alias: str, port: int, compat: bool = False,
                    stops: list[Path] | None = None) -> Iterator[LocalCluster]:
    """A plaintext cluster on the current Kafka (`compat`: on the last 3.x release), on `port` as
    this worker moves it. With `stops` (the session's `cluster_stops`), it is stopped with the
    session's other clusters, not alone."""
    cluster = LocalCluster(alias, worker_port(port), home / alias, compat=compat)
    cluster.start()
    try:
        yield cluster
    finally:
        _stop(cluster, stops)


def _stop(cluster: LocalCluster, stops: list[Path] | None) -> None:
    if stops is None:
        cluster.stop()
    else:
        stops.append(cluster.pid_file)


# The secured cluster's SCRAM password, made at test time and reachable only through the
# environment, the way a flow file names it: ${env:DR_TEST_SEC_PASSWORD}.
SEC_PASSWORD_VARIABLE = "DR_TEST_SEC_PASSWORD"
FLOW_PRINCIPALS = ("User:drs", "User:drs-client")
# What a flow's principal needs, by the cluster's role (least privilege; docs/security.md).
SOURCE_ACLS = [("TOPIC", "*", "LITERAL", op) for op in ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")] + [
    ("GROUP", "*", "LITERAL", op) for op in ("DESCRIBE", "READ")] + [
    ("TOPIC", "__consumer_timestamps", "LITERAL", op) for op in ("WRITE", "CREATE")] + [
    ("CLUSTER", "kafka-cluster", "LITERAL", "DESCRIBE")]
DESTINATION_ACLS = [("TOPIC", "*", "LITERAL", op) for op in
                    ("CREATE", "ALTER", "ALTER_CONFIGS", "DESCRIBE", "DESCRIBE_CONFIGS", "WRITE", "READ")] + [
    ("GROUP", "*", "LITERAL", op) for op in ("DESCRIBE", "READ")] + [
    ("CLUSTER", "kafka-cluster", "LITERAL", op) for op in ("DESCRIBE", "IDEMPOTENT_WRITE")] + [
    ("TOPIC", "__dr_stream_runs.", "PREFIXED", "DELETE")]


SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
SCRAM_USERS = ("drs", "drs-lp", "app")


def started_secured(home: Path, alias: str, port: int, pki, extra_acls: Sequence[tuple[str, str, str, str]] = (),
                    stops: list[Path] | None = None) -> Iterator[LocalCluster]:
    """A secured cluster (`dev.clusters.Secured`) whose SCRAM users share one password made now
    and kept only in the environment; the flow principals hold what a flow needs on either side."""
    import os
    import secrets

    from dr_stream.dev.clusters import Secured
    from tests.kafka_tools import grant

    password = os.environ.setdefault(SEC_PASSWORD_VARIABLE, secrets.token_hex(12))
    users = tuple((u, password) for u in SCRAM_USERS)
    cluster = LocalCluster(alias, worker_port(port), home / alias, Secured(pki, users))
    cluster.start()
    try:
        for principal in FLOW_PRINCIPALS:
            grant(cluster.bootstrap, principal, SOURCE_ACLS + DESTINATION_ACLS + list(extra_acls))
        yield cluster
    finally:
        _stop(cluster, stops)


def scram(pki, password: str = f"${{env:{SEC_PASSWORD_VARIABLE}}}", user: str = "drs", **trust) -> dict[str, str]:
    """SASL_SSL with SCRAM-SHA-512 as `user`; the CA as a PEM file unless `trust` says otherwise."""
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="{user}" password="{password}";',
        **(trust or {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_pem)}),
    }
