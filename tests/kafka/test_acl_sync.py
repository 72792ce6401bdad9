"""ACL sync between two clusters with the standard authorizer: a principal that reads a topic as
its group on the source does the same on the destination after failover; WRITE stays off a
replica; what the source no longer grants the destination loses, and only what the flow made."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException

from dr_stream.core.acl_mapping import Acl
from dr_stream.core.config import ClusterConfig, load_flow
from dr_stream.kafka import clients
from dr_stream.kafka.acls import describe_acls
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.replication.acl_sync import AclSync
from tests.clusters import SEC_PASSWORD_VARIABLE, scram
from tests.flows import running_flow
from tests.kafka_tools import (
    committed,
    consume_and_commit,
    create_topic,
    delete_topics,
    grant,
    produce,
    revoke,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration


def app_consumer(cluster, pki, group: str) -> Consumer:
    """An application's consumer, as User:app over SASL_SSL."""
    return Consumer({"bootstrap.servers": cluster.sasl_ssl_bootstrap, "group.id": group,
                     "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "app",
                     "sasl.password": os.environ[SEC_PASSWORD_VARIABLE], "ssl.ca.location": str(pki.ca_pem),
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})


def read_as_app(cluster, pki, topic: str, group: str, wanted: int) -> list[int]:
    """Offsets `group` reads as User:app from its committed position, until `wanted` records or an
    authorization error (raised)."""
    consumer = app_consumer(cluster, pki, group)
    try:
        consumer.subscribe([topic])
        offsets: list[int] = []
        deadline_polls = 300
        while len(offsets) < wanted and deadline_polls:
            deadline_polls -= 1
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            offsets.append(msg.offset())
        return offsets
    finally:
        consumer.close()


def flow_file(directory: Path, sec, sec2, pki, topic: str) -> str:
    path = directory / "acl-flow.yaml"
    path.write_text(yaml.safe_dump({
        "name": "sec-to-sec2-acls",
        "source": {"alias": "sec", "bootstrap_servers": sec.sasl_ssl_bootstrap, "kafka": scram(pki)},
        "destination": {"alias": "sec2", "bootstrap_servers": sec2.sasl_ssl_bootstrap, "kafka": scram(pki)},
        "topics": {"include": [topic.replace(".", r"\.")]},
        "offsets": {"groups": {"include": ["acl-app-.*"]}},
        "acls": {"enabled": True, "interval": "1s"},
        "streaming": {"checkpoint_dir": str(directory / "checkpoints"), "offset_index": str(directory / "index"),
                      "trigger": "500ms"},
    }))
    return str(path)


def acls_of(cluster, principal: str) -> set[Acl]:
    """`principal`'s ACLs on the cluster, read on its plaintext (super user) listener."""
    harness = ClusterConfig(cluster.alias, cluster.bootstrap)
    return {a for a in describe_acls(clients.admin(harness), harness) if a.principal == principal}


def app_acls(cluster) -> set[Acl]:
    return acls_of(cluster, "User:app")


def forge_ledger_entry(cluster, flow: str, acl: Acl) -> None:
    """What anyone with WRITE on the topic an earlier version kept its ledger in could write: "the
    flow created this ACL" (so it may delete it)."""
    from dataclasses import asdict

    from confluent_kafka import Producer

    from dr_stream.core.contracts import acl_key, acls_topic

    create_topic(cluster.bootstrap, acls_topic(flow), partitions=1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    producer.produce(acls_topic(flow), key=acl_key(asdict(acl)), value=b"created")
    assert producer.flush(30) == 0


def test_a_reader_on_the_source_reads_the_same_topic_and_group_on_the_destination_after_failover(
        spark, sec, sec2, pki, tmp_path, capsys):
    topic, group = unique("acl.orders."), unique("acl-app-")
    prefix = topic.rsplit(".", 1)[0] + "."
    reads = [("TOPIC", prefix, "PREFIXED", "READ"), ("TOPIC", prefix, "PREFIXED", "DESCRIBE"),
             ("GROUP", group, "LITERAL", "READ")]
    wildcard = ("TOPIC", "*", "LITERAL", "DESCRIBE_CONFIGS")  # every topic of the source
    native = ("TOPIC", "acl.native", "LITERAL", "DESCRIBE")  # the destination's own: never touched
    locks_out = ("TOPIC", topic, "LITERAL", "WRITE")  # a DENY of the flow's own principal
    create_topic(sec.bootstrap, topic, partitions=1)
    grant(sec.bootstrap, "User:app", [*reads, wildcard, ("TOPIC", topic, "LITERAL", "WRITE")])
    grant(sec.bootstrap, "User:*", [("TOPIC", topic, "LITERAL", "READ")])
    grant(sec.bootstrap, "User:drs", [locks_out], permission="DENY")
    grant(sec2.bootstrap, "User:app", [native])
    # an entry an earlier version's ledger topic could be made to hold: the destination's own ACL
    forge_ledger_entry(sec2, "sec-to-sec2-acls", Acl("TOPIC", "acl.native", "LITERAL", "User:app", "*", "DESCRIBE",
                                                     "ALLOW"))
    path = flow_file(tmp_path, sec, sec2, pki, topic)
    try:
        produce(sec.bootstrap, topic, ({"value": f"r{i}".encode()} for i in range(100)))
        assert read_as_app(sec, pki, topic, group, 40)[:1] == [0]  # app reads on the source
        consume_and_commit(sec.bootstrap, topic, group, {0: 40}, helper=False)
        with pytest.raises(KafkaException, match="AUTHORIZATION"):  # and not yet on the destination
            read_as_app(sec2, pki, topic, group, 1)

        with running_flow(spark, load_flow(path)):
            assert wait_until(lambda: committed(sec2.bootstrap, group, topic, 1) == {0: 40}, 120)
            # the prefix and the wildcard name the one copy the flow makes, nothing else under them
            expected = {Acl("TOPIC", topic, "LITERAL", "User:app", "*", op, "ALLOW")
                        for op in ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")} | {
                Acl("GROUP", group, "LITERAL", "User:app", "*", "READ", "ALLOW"),
                Acl(*native[:3], "User:app", "*", native[3], "ALLOW")}
            assert wait_until(lambda: app_acls(sec2) == expected, 60), app_acls(sec2)
            out = capsys.readouterr().out
            assert f"acls: narrowed to sec2: ALLOW User:app WRITE TOPIC {topic}: WRITE left out (acls.write is " \
                   "off: the copies are a replica)" in out
            assert f"acls: created on sec2: ALLOW User:app READ TOPIC {topic}" in out
            assert f"acls: not copied to sec2: ALLOW User:* READ TOPIC {topic}: the wildcard principal" in out
            assert f"acls: not copied to sec2: DENY User:drs WRITE TOPIC {topic}: a DENY of User:drs, the flow's " \
                   "own principal on the destination, could stop it copying" in out
            assert "acls: took over 0 ACL(s) an earlier version recorded in __dr_stream_acls.sec-to-sec2-acls" in out
            assert acls_of(sec2, "User:*") == set()
            assert not [a for a in acls_of(sec2, "User:drs") if a.permission == "DENY"]
            drilled = subprocess.run([sys.executable, "-m", "dr_stream.cli", "drill", "--config", path, "--json"],
                                     capture_output=True, text=True, timeout=300)
            [acls] = [c for c in json.loads(drilled.stdout)["checks"] if c["area"] == "acls"]
            # what to grant by hand is said; the refused DENY takes no application's access away
            assert acls["state"] == "FAIL" and "User:*" in acls["detail"], acls
            assert "User:drs" not in acls["detail"], acls

        # failover: the application, with its usual principal, resumes on the destination
        assert read_as_app(sec2, pki, topic, group, 60) == list(range(40, 100))

        # the source stops granting the group; a flow started again (a new process) removes
        # the copy it made, from what its state recorded, and leaves the destination's own ACL
        # alone although the forged entry names it
        revoke(sec.bootstrap, "User:app", [reads[2]])
        config = load_flow(path)
        passes: list = []
        source, destination = ClusterContext(config.source), ClusterContext(config.destination)
        sync = AclSync(config, source, destination, log=lambda _: None, on_pass=passes.append)
        try:
            done = sync.sync_once()
        finally:
            source.close()
            destination.close()
        assert passes == [done]  # what the flow's /metrics hears: the WRITE narrowed, User:*, the DENY
        left_out = done.left_out()
        assert left_out["narrowed"] >= 1 and left_out["unmappable"] >= 1 and left_out["refused"] >= 1, left_out
        assert done.removed == (Acl("GROUP", group, "LITERAL", "User:app", "*", "READ", "ALLOW"),)
        assert app_acls(sec2) == expected - {Acl("GROUP", group, "LITERAL", "User:app", "*", "READ", "ALLOW")}
    finally:
        revoke(sec.bootstrap, "User:app", [*reads, wildcard, ("TOPIC", topic, "LITERAL", "WRITE")])
        revoke(sec.bootstrap, "User:*", [("TOPIC", topic, "LITERAL", "READ")])
        revoke(sec.bootstrap, "User:drs", [locks_out], permission="DENY")
        revoke(sec2.bootstrap, "User:app", [("TOPIC", topic, "LITERAL", op) for op in
                                            ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")] + [reads[2], native])
        delete_topics(sec.bootstrap, [topic])
        delete_topics(sec2.bootstrap, [topic, "__dr_stream_acls.sec-to-sec2-acls"])
