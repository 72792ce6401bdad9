"""How the suite's KRaft clusters start, and what a flow's principal needs on a secured one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from dr_stream.dev.clusters import LocalCluster


def started_cluster(home: Path, alias: str, port: int) -> Iterator[LocalCluster]:
    cluster = LocalCluster(alias, port, home / alias)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


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
