"""Secured clusters on a real broker: SASL_SSL with SCRAM-SHA-512 and mutual TLS, written with
Apache Kafka's standard Java property names, certificates and password made at test time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from dr_stream.core.config import load_flow
from dr_stream.dev.certificates import STORE_PASSWORD
from dr_stream.runtime.paths import project_root
from tests.clusters import DESTINATION_ACLS, SEC_PASSWORD_VARIABLE, SOURCE_ACLS, scram
from tests.flows import running_flow
from tests.kafka_tools import (
    committed,
    consume_all,
    consume_and_commit,
    count,
    create_topic,
    delete_topics,
    grant,
    produce,
    revoke,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration

def mutual_tls(pki) -> dict[str, str]:
    """TLS with the client certificate CN=drs-client in a PKCS12 keystore, the CA in a JKS truststore."""
    return {
        "security.protocol": "SSL",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(pki.client_keystore),
        "ssl.keystore.password": STORE_PASSWORD,
        "ssl.truststore.location": str(pki.truststore_jks), "ssl.truststore.password": STORE_PASSWORD,
    }


def flow_yaml(directory: Path, name: str, source: dict, destination: dict, topic: str) -> str:
    path = directory / f"{name}.yaml"
    state = directory / name
    path.write_text(yaml.safe_dump({
        "name": name, "source": source, "destination": destination,
        "topics": {"include": [topic]},
        "offsets": {"groups": {"include": ["sec-.*"]}},
        "streaming": {"checkpoint_dir": str(state / "checkpoints"), "offset_index": str(state / "offset-index"),
                      "trigger": "500ms"},
    }))
    return str(path)


def copy_and_sync(spark, path: str, source, destination, topic: str, group: str, records: int,
                  at: dict[int, int], prefix: str) -> None:
    """Runs the flow until `records` values `<prefix><i>` (round-robin over the partitions of `at`)
    are copied and `group`, committed on the source at `at`, shows the same offsets on the destination."""
    partitions = len(at)
    produce(source.bootstrap, topic, ({"value": f"{prefix}{i}".encode(), "partition": i % partitions}
                                      for i in range(records)))
    with running_flow(spark, load_flow(path)):
        assert wait_until(lambda: count(destination.bootstrap, topic) == records, 120)
        consume_and_commit(source.bootstrap, topic, group, at, helper=False)
        assert wait_until(lambda: committed(destination.bootstrap, group, topic, partitions) == at, 60)


def cli(*args: str, timeout: float = 180) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "dr_stream.cli", *args], capture_output=True, text=True,
                            timeout=timeout, cwd=project_root())
    return result, time.monotonic() - started


def no_librdkafka_lines(result: subprocess.CompletedProcess) -> bool:
    return not any(line.startswith("%") and "|" in line[:4]
                   for line in (result.stdout + result.stderr).splitlines())


class TestCheckConfig:
    def test_every_supported_way_of_writing_trust_and_identity_reaches_both_client_families(self, sec, dc1, pki,
                                                                                          tmp_path):
        inline = {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": pki.ca_pem.read_text()}
        p12 = {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(pki.truststore_p12),
               "ssl.truststore.password": STORE_PASSWORD}
        ways = {
            "pem-file": {"bootstrap_servers": sec.sasl_ssl_bootstrap, "kafka": scram(pki)},
            "inline-pem": {"bootstrap_servers": sec.sasl_ssl_bootstrap, "kafka": scram(pki, **inline)},
            "pkcs12-truststore": {"bootstrap_servers": sec.sasl_ssl_bootstrap, "kafka": scram(pki, **p12)},
            "mutual-tls": {"bootstrap_servers": sec.ssl_bootstrap, "kafka": mutual_tls(pki)},
        }
        for way, destination in ways.items():
            path = flow_yaml(tmp_path, way, {"alias": "dc1", "bootstrap_servers": dc1.bootstrap},
                             {"alias": "sec", **destination}, "x")
            result, _ = cli("check-config", "--config", path, "--connect")
            assert result.returncode == 0, (way, result.stdout, result.stderr)
            lines = result.stdout.strip().splitlines()
            assert lines[1].startswith(f"dc1: ok (cluster.id {dc1.cluster_id()}"), way
            assert lines[2].startswith(f"sec: ok (cluster.id {sec.cluster_id()}"), (way, lines)
            assert "Java clients" in lines[2]
            assert no_librdkafka_lines(result)

    @pytest.mark.parametrize(("case", "expected_exit", "expected"), [
        ("wrong-password", 3, "sec: authentication failed: "),
        ("unknown-ca", 3, "sec: TLS handshake failed: "),
        ("missing-truststore", 78,  # ExitCode.CONFIG: the file names a truststore that is not there
         "destination.kafka.ssl.truststore.location: /nowhere/ca.pem: no such file (cluster sec)"),
    ])
    def test_bad_credentials_are_one_line_naming_the_cluster_and_cause_within_seconds(
            self, sec, dc1, pki, tmp_path, case, expected_exit, expected):
        other_ca = tmp_path / "other-ca"
        kafka = {
            "wrong-password": scram(pki, password="not-the-password"),
            "unknown-ca": scram(pki, **{"ssl.truststore.type": "PEM", "ssl.truststore.location": str(
                _other_ca(other_ca))}),
            "missing-truststore": scram(pki, **{"ssl.truststore.type": "PEM",
                                                 "ssl.truststore.location": "/nowhere/ca.pem"}),
        }[case]
        path = flow_yaml(tmp_path, case, {"alias": "dc1", "bootstrap_servers": dc1.bootstrap},
                         {"alias": "sec", "bootstrap_servers": sec.sasl_ssl_bootstrap, "kafka": kafka}, "x")
        commands = [["check-config", "--config", path, "--connect"], ["status", "--config", path]]
        if case == "wrong-password":
            commands += [["failover", "--config", path, "--dry-run"], ["run", "--config", path]]
        for command in commands:
            result, seconds = cli(*command)
            assert result.returncode == expected_exit, (command, result.stdout, result.stderr)
            errors = [line for line in (result.stdout + result.stderr).splitlines()
                      if "sec" in line and ("failed" in line or "no such file" in line)]
            assert len(errors) == 1 and expected in errors[0], (command, result.stdout, result.stderr)
            if expected_exit == 3:  # the line names where to look: the file and the key
                key = "sasl.jaas.config" if case == "wrong-password" else "ssl.truststore.location"
                assert f"{path}: destination.kafka.{key})" in errors[0], (command, errors)
            assert "not-the-password" not in result.stdout + result.stderr
            assert no_librdkafka_lines(result)
            assert seconds < 60, (command, seconds)


def _other_ca(home: Path) -> Path:
    """A CA that signed nothing the broker holds."""
    home.mkdir(parents=True, exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-out", "ca.pem",
                    "-days", "1", "-subj", "/CN=some other CA"], cwd=home, check=True, capture_output=True)
    return home / "ca.pem"


class TestSecuredFlows:
    def test_into_sasl_ssl_copies_translates_and_syncs_with_the_password_only_in_the_environment(
            self, spark, sec, dc1, pki, tmp_path, capsys):
        topic, group = unique("sec.in."), unique("sec-g-")
        secret = os.environ[SEC_PASSWORD_VARIABLE]
        path = flow_yaml(tmp_path, "dc1-to-sec", {"alias": "dc1", "bootstrap_servers": dc1.bootstrap},
                         {"alias": "sec", "bootstrap_servers": sec.sasl_ssl_bootstrap, "kafka": scram(pki)}, topic)
        assert secret not in Path(path).read_text()
        create_topic(dc1.bootstrap, topic, partitions=2)
        try:
            copy_and_sync(spark, path, dc1, sec, topic, group, 400, {0: 150, 1: 120}, "v")
            assert sorted(r.value for r in consume_all(sec.bootstrap, topic)) == sorted(
                f"v{i}".encode() for i in range(400))
            status, _ = cli("status", "--config", path, "--json")
            failover, _ = cli("failover", "--config", path, "--group", group, "--dry-run", "--json")
            assert status.returncode == 0 and failover.returncode == 0, status.stderr + failover.stderr
            assert [r["lag_records"] for r in json.loads(status.stdout)["replication"]] == [0, 0]
            assert {p["action"] for p in json.loads(failover.stdout)["positions"]} == {"unchanged"}
            shown = capsys.readouterr()
            outputs = [status.stdout, status.stderr, failover.stdout, failover.stderr, shown.out, shown.err]
            assert not any(secret in text for text in outputs)
            assert not _files_holding(tmp_path / "dc1-to-sec", secret)
        finally:
            delete_topics(dc1.bootstrap, [topic])
            delete_topics(sec.bootstrap, [topic])

    def test_failback_out_of_a_sasl_ssl_cluster_copies_its_own_records_back_and_moves_the_group(
            self, spark, sec, dc1, pki, tmp_path):
        """dc1 -> sec ran; sec then took writes and a group read on; failback (sec -> dc1, the
        source reached over SASL_SSL) brings sec's records and the group back to dc1."""
        topic, group = unique("sec.fb."), unique("sec-fb-")
        forward = flow_yaml(tmp_path, "dc1-to-sec-fb", {"alias": "dc1", "bootstrap_servers": dc1.bootstrap},
                            {"alias": "sec", "bootstrap_servers": sec.sasl_ssl_bootstrap, "kafka": scram(pki)}, topic)
        back = flow_yaml(tmp_path, "sec-to-dc1-fb", {"alias": "sec", "bootstrap_servers": sec.sasl_ssl_bootstrap,
                                                     "kafka": scram(pki)},
                         {"alias": "dc1", "bootstrap_servers": dc1.bootstrap}, topic)
        create_topic(dc1.bootstrap, topic, partitions=1)
        try:
            copy_and_sync(spark, forward, dc1, sec, topic, group, 300, {0: 150}, "dc1-")
            produce(sec.bootstrap, topic, ({"value": f"sec-{i}".encode()} for i in range(100)))
            consume_and_commit(sec.bootstrap, topic, group, {0: 350}, helper=False)
            result, _ = cli("failback", "--config", back, "--group", group, "--json", timeout=300)
            assert result.returncode == 0, result.stderr[-3000:]
            report = json.loads(result.stdout)
            assert (report["copied"], report["unreplicated"]) == (100, [])
            # The failback flow's own translate query may have synced it first: then it is unchanged.
            [position] = report["positions"]
            assert (position["method"], position["offset"]) == ("exact", 350)
            assert position["action"] in ("committed", "unchanged")
            values = [r.value for r in consume_all(dc1.bootstrap, topic)]
            assert sorted(values) == sorted([f"dc1-{i}".encode() for i in range(300)]
                                            + [f"sec-{i}".encode() for i in range(100)])
            assert committed(dc1.bootstrap, group, topic, 1) == {0: 350}
            assert os.environ[SEC_PASSWORD_VARIABLE] not in result.stdout + result.stderr
        finally:
            delete_topics(dc1.bootstrap, [topic])
            delete_topics(sec.bootstrap, [topic])

    def test_out_of_a_mutual_tls_cluster_copies_every_record_once(self, spark, sec, dc2, pki, tmp_path):
        topic = unique("sec.out.")
        path = flow_yaml(tmp_path, "sec-to-dc2", {"alias": "sec", "bootstrap_servers": sec.ssl_bootstrap,
                                                  "kafka": mutual_tls(pki)},
                         {"alias": "dc2", "bootstrap_servers": dc2.bootstrap}, topic)
        create_topic(sec.bootstrap, topic, partitions=2)
        try:
            produce(sec.bootstrap, topic, ({"value": f"m{i}".encode(), "partition": i % 2} for i in range(300)))
            with running_flow(spark, load_flow(path)):
                assert wait_until(lambda: count(dc2.bootstrap, topic) == 300, 120)
            assert sorted(r.value for r in consume_all(dc2.bootstrap, topic)) == sorted(
                f"m{i}".encode() for i in range(300))
        finally:
            delete_topics(sec.bootstrap, [topic])
            delete_topics(dc2.bootstrap, [topic])


def _out_of_sec_as_drs_lp(tmp_path, name: str, sec, dc2, pki, topic: str):
    """A flow file from the secured cluster, as the least-privilege user drs-lp, to dc2."""
    return flow_yaml(tmp_path, name, {"alias": "sec", "bootstrap_servers": sec.sasl_ssl_bootstrap,
                                      "kafka": scram(pki, user="drs-lp")},
                     {"alias": "dc2", "bootstrap_servers": dc2.bootstrap}, topic)


class TestLeastPrivilege:
    """User drs-lp holds exactly the ACLs docs/security.md lists for its side, and nothing else."""

    def test_into_a_cluster_with_the_destination_acls_and_a_revoked_one_named_while_copying_goes_on(
            self, spark, sec, dc1, pki, tmp_path, capsys):
        topic, group = unique("sec.lp."), unique("sec-lp-")
        path = flow_yaml(tmp_path, "dc1-to-sec-lp", {"alias": "dc1", "bootstrap_servers": dc1.bootstrap},
                         {"alias": "sec", "bootstrap_servers": sec.sasl_ssl_bootstrap,
                          "kafka": scram(pki, user="drs-lp")}, topic)
        create_topic(dc1.bootstrap, topic, partitions=1, config={"retention.ms": "86400000"})
        grant(sec.bootstrap, "User:drs-lp", DESTINATION_ACLS)
        try:
            produce(dc1.bootstrap, topic, ({"value": f"a{i}".encode()} for i in range(200)))
            with running_flow(spark, load_flow(path)):
                assert wait_until(lambda: count(sec.bootstrap, topic) == 200, 120)
                consume_and_commit(dc1.bootstrap, topic, group, {0: 50}, helper=False)
                assert wait_until(lambda: committed(sec.bootstrap, group, topic, 1) == {0: 50}, 60)
                revoke(sec.bootstrap, "User:drs-lp", [("GROUP", "*", "LITERAL", "READ")])
                consume_and_commit(dc1.bootstrap, topic, group, {0: 120}, helper=False)
                named = f"sec: User:drs-lp may not READ GROUP {group} (committing offsets to it)"
                assert wait_until(lambda: named in capsys.readouterr().out, 60)
                # the drill sees, before any failover, that the destination would refuse this group's commit
                drilled, _ = cli("drill", "--config", path, "--json")
                assert drilled.returncode == 2, drilled.stderr[-2000:]
                assert json.loads(drilled.stdout)["failures"] == [
                    f"failover {group}: sec: User:drs-lp may not READ GROUP {group} (committing its offsets at "
                    f"failover); grant it: kafka-acls --add --allow-principal User:drs-lp --operation READ "
                    f"--group {group}"]
                produce(dc1.bootstrap, topic, ({"value": f"b{i}".encode()} for i in range(100)))
                assert wait_until(lambda: count(sec.bootstrap, topic) == 300, 120)
            assert committed(sec.bootstrap, group, topic, 1) == {0: 50}
        finally:
            revoke(sec.bootstrap, "User:drs-lp", DESTINATION_ACLS)
            delete_topics(dc1.bootstrap, [topic])
            delete_topics(sec.bootstrap, [topic])

    def test_out_of_a_cluster_with_the_source_acls_copies_and_translates(self, spark, sec, dc2, pki, tmp_path):
        topic, group = unique("sec.lps."), unique("sec-lps-")
        path = _out_of_sec_as_drs_lp(tmp_path, "sec-lp-to-dc2", sec, dc2, pki, topic)
        create_topic(sec.bootstrap, topic, partitions=2)
        grant(sec.bootstrap, "User:drs-lp", SOURCE_ACLS)
        try:
            copy_and_sync(spark, path, sec, dc2, topic, group, 200, {0: 40, 1: 60}, "s")
        finally:
            revoke(sec.bootstrap, "User:drs-lp", SOURCE_ACLS)
            delete_topics(sec.bootstrap, [topic])
            delete_topics(dc2.bootstrap, [topic])

    def test_without_read_on___consumer_offsets_the_poller_says_so_once_and_translates_through_the_admin_api(
            self, spark, sec, dc2, pki, tmp_path, capsys):
        topic, group = unique("sec.lpn."), unique("sec-lpn-")
        # the source ACLs with the replicated topics granted by prefix, not TOPIC *: no READ on
        # __consumer_offsets (TOPIC * would grant it)
        acls = [("TOPIC", "sec.lpn.", "PREFIXED", op) for op in ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")] + [
            ("TOPIC", "__consumer_timestamps", "LITERAL", op) for op in ("READ", "DESCRIBE")] + [
            rule for rule in SOURCE_ACLS if rule[:2] != ("TOPIC", "*")]
        path = _out_of_sec_as_drs_lp(tmp_path, "sec-lpn-to-dc2", sec, dc2, pki, topic)
        create_topic(sec.bootstrap, topic, partitions=2)
        grant(sec.bootstrap, "User:drs-lp", acls)
        try:
            copy_and_sync(spark, path, sec, dc2, topic, group, 100, {0: 20, 1: 30}, "n")
            said = [line for line in capsys.readouterr().out.splitlines() if "__consumer_offsets" in line]
            assert len(said) == 1, said
            assert ("group poller: sec: User:drs-lp may not READ TOPIC __consumer_offsets" in said[0]
                    and "reading committed offsets through the admin API instead" in said[0]), said
        finally:
            revoke(sec.bootstrap, "User:drs-lp", acls)
            delete_topics(sec.bootstrap, [topic])
            delete_topics(dc2.bootstrap, [topic])


def _files_holding(root: Path, secret: str) -> list[str]:
    """Every file under `root` (checkpoints, offset index, translations) whose bytes hold `secret`."""
    needle = secret.encode()
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]
