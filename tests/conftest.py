"""The suite's fixtures: one Spark session, the test KRaft clusters, topics deleted after a test.

Helpers that are not fixtures live beside it: `tests/clusters.py` (how a test cluster starts,
the secured cluster's ACLs), `tests/flows.py` (flow configs and running flows).

The test clusters use their own ports and directory so a developer's `dr-stream dev up`
clusters are never touched. Ports stay below 32768, the start of Linux's ephemeral range: a
test opens thousands of client connections, and a broker whose port one of them holds cannot
start (the likely cause of one dc3 start-up failure seen in a full run).
Every process started here is stopped by its PID at the end.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dr_stream.dev.clusters import LocalCluster
from dr_stream.runtime.paths import cache_dir
from tests.clusters import started_cluster, started_secured

# Fixtures that start a JVM (Spark) or a broker: a test that asks for one is an integration test
# whether or not its module says so, and `make unit` (-m "not integration") never starts either.
STARTS_INFRASTRUCTURE = {"spark", "dc1", "dc2", "dc3", "dc39", "sec", "sec2", "pki"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if STARTS_INFRASTRUCTURE & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A unit run that started Spark's JVM anyway fails: something reached it without the fixture."""
    if "not integration" not in (session.config.getoption("markexpr") or ""):
        return
    from pyspark import SparkContext

    if SparkContext._gateway is not None:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print("\nmake unit started Spark's JVM: the test that did must be marked integration")


# The session's Spark, once a test asked for it: the module guard below looks at its queries.
_SPARK: list = []


@pytest.fixture(scope="session")
def spark():
    from dr_stream.runtime.session import spark_session

    # 4 slots: real-time mode flows need one per source partition plus one (test_realtime_mode.py).
    session = spark_session("dr-stream-tests", master="local[4]")
    session.sparkContext.setLogLevel("ERROR")
    _SPARK.append(session)
    yield session
    _SPARK.clear()
    session.stop()


@pytest.fixture(scope="module", autouse=True)
def no_query_outlives_its_module(request) -> Iterator[None]:
    """A module whose flows leave a streaming query running fails here, and the query is stopped:
    query names are unique in the one session, so a later flow of the same name could not start
    its own (a translate query left by one module once kept another's from ever running)."""
    yield
    if not _SPARK:
        return
    left = [(q.name, q.runId, q.isActive) for q in _SPARK[0].streams.active]
    for query in _SPARK[0].streams.active:
        query.stop()
    if left:
        pytest.fail(f"{request.node.nodeid} left streaming queries running: {left}")


@pytest.fixture(scope="session")
def cluster_home() -> Iterator[Path]:
    base = cache_dir() / "test-clusters"
    base.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="run-", dir=base))
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster_stops(cluster_home) -> Iterator[list[Path]]:
    """The PID files of the session's clusters, stopped here all at once when the session ends:
    one after the other, their controlled shutdowns took half a minute of the suite."""
    from dr_stream.dev.processes import stop_pids

    pid_files: list[Path] = []
    yield pid_files
    stop_pids(pid_files, 30)


@pytest.fixture(scope="session")
def dc1(cluster_home, cluster_stops) -> Iterator[LocalCluster]:
    yield from started_cluster(cluster_home, "dc1", 21092, stops=cluster_stops)


@pytest.fixture(scope="session")
def dc2(cluster_home, cluster_stops) -> Iterator[LocalCluster]:
    yield from started_cluster(cluster_home, "dc2", 22092, stops=cluster_stops)


@pytest.fixture(scope="session")
def dc3(cluster_home, cluster_stops) -> Iterator[LocalCluster]:
    yield from started_cluster(cluster_home, "dc3", 23092, stops=cluster_stops)


@pytest.fixture(scope="session")
def dc39(cluster_home, cluster_stops) -> Iterator[LocalCluster]:
    """A Kafka 3.9 cluster (`kafka-broker-compat`), for the compatibility test."""
    yield from started_cluster(cluster_home, "dc39", 31092, compat=True, stops=cluster_stops)


@pytest.fixture(scope="session")
def pki(cluster_home):
    from dr_stream.dev.certificates import make_pki

    return make_pki(cluster_home / "pki")


@pytest.fixture(scope="session")
def sec(cluster_home, pki, cluster_stops) -> Iterator[LocalCluster]:
    """A secured cluster: SASL_SSL (SCRAM-SHA-512, users drs, drs-lp and app) on 20094, mutual TLS
    (CN=drs-client) on 20095, the standard authorizer on; the test harness works on its plaintext
    listener (20092). drs and drs-client hold what a flow needs on either side; drs-lp and app
    hold nothing until a test grants them exactly what it checks."""
    yield from started_secured(cluster_home, "sec", 20092, pki, stops=cluster_stops)


@pytest.fixture(scope="session")
def sec2(cluster_home, pki, cluster_stops) -> Iterator[LocalCluster]:
    """A second secured cluster like `sec` (plaintext 30092, SASL_SSL 30094, TLS 30095), for what
    needs an authorizer on both sides (ACL sync); drs may also create and delete ACLs on it."""
    yield from started_secured(cluster_home, "sec2", 30092, pki, [("CLUSTER", "kafka-cluster", "LITERAL", "ALTER")],
                               stops=cluster_stops)


@pytest.fixture
def topics(dc1, dc2, request) -> Iterator[list[str]]:
    """Names a test registers here are deleted from every test cluster afterwards."""
    from tests.kafka_tools import delete_topics

    names: list[str] = []
    yield names
    clusters = [dc1, dc2]
    if "dc3" in request.fixturenames:
        clusters.append(request.getfixturevalue("dc3"))
    for cluster in clusters:
        delete_topics(cluster.bootstrap, names)
