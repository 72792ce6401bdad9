"""Session-scoped real infrastructure: one Spark session, test KRaft clusters, running flows.

The test clusters use their own ports and directory so a developer's `dr-stream dev up`
clusters are never touched. Ports stay below 32768, the start of Linux's ephemeral range: a
test opens thousands of client connections, and a broker whose port one of them holds cannot
start (the likely cause of one dc3 start-up failure seen in a full run).
Every process started here is stopped by its PID at the end.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dr_stream.background import Background
from dr_stream.core.config import FlowConfig, parse_flow
from dr_stream.dev.clusters import LocalCluster
from dr_stream.runtime.paths import cache_dir


@pytest.fixture(scope="session")
def spark():
    from dr_stream.runtime.session import spark_session

    # 4 slots: real-time mode flows need one per source partition plus one (test_realtime_mode.py).
    session = spark_session("dr-stream-tests", master="local[4]")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def cluster_home() -> Iterator[Path]:
    base = cache_dir() / "test-clusters"
    base.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="run-", dir=base))
    yield home
    shutil.rmtree(home, ignore_errors=True)


def _cluster(home: Path, alias: str, port: int) -> Iterator[LocalCluster]:
    cluster = LocalCluster(alias, port, home / alias)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def dc1(cluster_home) -> Iterator[LocalCluster]:
    yield from _cluster(cluster_home, "dc1", 21092)


@pytest.fixture(scope="session")
def dc2(cluster_home) -> Iterator[LocalCluster]:
    yield from _cluster(cluster_home, "dc2", 22092)


@pytest.fixture(scope="session")
def dc3(cluster_home) -> Iterator[LocalCluster]:
    yield from _cluster(cluster_home, "dc3", 23092)


# The secured cluster's SCRAM password, made at test time and reachable only through the
# environment, the way a flow file names it: ${env:DR_TEST_SEC_PASSWORD}.
SEC_PASSWORD_VARIABLE = "DR_TEST_SEC_PASSWORD"
FLOW_PRINCIPALS = ("User:drs", "User:drs-client")
# What a flow's principal needs, by the cluster's role (least privilege; see README "Secured clusters").
SOURCE_ACLS = [("TOPIC", "*", "LITERAL", op) for op in ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")] + [
    ("GROUP", "*", "LITERAL", op) for op in ("DESCRIBE", "READ")] + [
    ("TOPIC", "__consumer_timestamps", "LITERAL", op) for op in ("WRITE", "CREATE")] + [
    ("CLUSTER", "kafka-cluster", "LITERAL", "DESCRIBE")]
DESTINATION_ACLS = [("TOPIC", "*", "LITERAL", op) for op in
                    ("CREATE", "ALTER", "ALTER_CONFIGS", "DESCRIBE", "DESCRIBE_CONFIGS", "WRITE", "READ")] + [
    ("GROUP", "*", "LITERAL", op) for op in ("DESCRIBE", "READ")] + [
    ("CLUSTER", "kafka-cluster", "LITERAL", op) for op in ("DESCRIBE", "IDEMPOTENT_WRITE")]


@pytest.fixture(scope="session")
def pki(cluster_home):
    from dr_stream.dev.certificates import make_pki

    return make_pki(cluster_home / "pki")


@pytest.fixture(scope="session")
def sec(cluster_home, pki) -> Iterator[LocalCluster]:
    """A secured cluster: SASL_SSL (SCRAM-SHA-512, users drs and drs-lp) on 20094, mutual TLS
    (CN=drs-client) on 20095, the standard authorizer on; the test harness works on its plaintext
    listener (20092). drs and drs-client hold what a flow needs on either side; drs-lp holds
    nothing until a test grants it exactly what it checks."""
    import os
    import secrets

    from dr_stream.dev.clusters import Secured
    from tests.kafka_tools import grant

    os.environ[SEC_PASSWORD_VARIABLE] = secrets.token_hex(12)
    cluster = LocalCluster("sec", 20092, cluster_home / "sec",
                           Secured(pki, tuple((user, os.environ[SEC_PASSWORD_VARIABLE]) for user in ("drs", "drs-lp"))))
    cluster.start()
    try:
        for principal in FLOW_PRINCIPALS:
            grant(cluster.bootstrap, principal, SOURCE_ACLS + DESTINATION_ACLS)
        yield cluster
    finally:
        cluster.stop()


def flow_config(source: LocalCluster, destination: LocalCluster, work: Path, name: str | None = None,
                **sections) -> FlowConfig:
    """A flow between two test clusters; `name` must differ from any flow running at the same time
    (Spark query names are unique within the session)."""
    raw = {
        "source": {"alias": source.alias, "bootstrap_servers": source.bootstrap},
        "destination": {"alias": destination.alias, "bootstrap_servers": destination.bootstrap},
        "streaming": {
            "checkpoint_dir": str(work / f"{source.alias}-to-{destination.alias}" / "checkpoints"),
            "offset_index": str(work / f"{source.alias}-to-{destination.alias}" / "offset-index"),
            "trigger": "500ms",
        },
    }
    if name:
        raw["name"] = name
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value}
    return parse_flow(raw, "<test>")


def flow_file(config: FlowConfig, directory: Path, **sections) -> str:
    """The flow as a YAML file, for the command line and the notebook."""
    import yaml

    c = config
    path = directory / "flow.yaml"
    path.write_text(yaml.safe_dump({
        "name": c.name,
        "source": {"alias": c.source.alias, "bootstrap_servers": c.source.bootstrap_servers},
        "destination": {"alias": c.destination.alias, "bootstrap_servers": c.destination.bootstrap_servers},
        "streaming": {"checkpoint_dir": c.streaming.checkpoint_dir, "offset_index": c.streaming.offset_index,
                      "translations": c.streaming.translations},
        **sections,
    }))
    return str(path)


def one_topic_flow_file(directory: Path, name: str, source: str, destination: str, topic: str, **streaming) -> Path:
    """A dc1 -> dc2 flow of one topic as a YAML file with its state under `directory`, for
    tests that run it as its own process."""
    import yaml

    path = directory / "flow.yaml"
    path.write_text(yaml.safe_dump({
        "name": name,
        "source": {"alias": "dc1", "bootstrap_servers": source},
        "destination": {"alias": "dc2", "bootstrap_servers": destination},
        "topics": {"include": [topic.replace(".", "\\.")]},
        "streaming": {"checkpoint_dir": str(directory / "checkpoints"), "offset_index": str(directory / "index"),
                      **streaming},
    }))
    return path


@contextmanager
def running_flow(spark, config: FlowConfig, log: Callable[[str], None] | None = None):
    """Runs a flow's replication query in this process until the block ends (its lines to `log`
    when given)."""
    from dr_stream.replication.flow import ReplicationFlow
    from dr_stream.replication.supervisor import run_until_stopped

    flow = ReplicationFlow(config, spark, log=log)
    flow.connect()
    stop = threading.Event()
    runner = Background(f"flow {config.name}", lambda: run_until_stopped(flow, stop)).start()
    try:
        yield flow
    finally:
        stop.set()
        runner.join(timeout=60)


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
