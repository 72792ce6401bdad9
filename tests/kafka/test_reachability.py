"""Why a cluster was not reached, from librdkafka's error events and the Java check's answer."""

from __future__ import annotations

from confluent_kafka import KafkaError

from dr_stream.kafka.reachability import Cause, Reachability, Refusal, cause, check_line, decisive, java_cause

AUTH = (KafkaError._AUTHENTICATION, "sasl_ssl://127.0.0.1:20094/bootstrap: SASL authentication error: "
        "Authentication failed due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 334ms in "
        "state AUTH_REQ)")
TLS = (KafkaError._SSL, "sasl_ssl://127.0.0.1:20094/bootstrap: SSL handshake failed: certificate verify failed "
       "(after 13ms in state SSL_HANDSHAKE)")
REFUSED = (KafkaError._TRANSPORT, "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused "
           "(after 0ms in state CONNECT)")
DOWN = (KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down")


def test_a_wrong_password_is_an_authentication_failure_whatever_else_was_seen():
    assert cause([DOWN, AUTH], 10) == Cause("authentication failed: SASL authentication error: Authentication "
                                            "failed due to invalid credentials with SASL mechanism SCRAM-SHA-512",
                                            Refusal.CREDENTIALS)
    assert decisive([DOWN, AUTH])


def test_an_unknown_ca_is_a_tls_failure():
    assert cause([TLS, DOWN], 10) == Cause("TLS handshake failed: SSL handshake failed: certificate verify failed",
                                           Refusal.TLS)
    assert decisive([TLS])


def test_a_closed_port_is_unreachable_and_waiting_could_still_help():
    assert cause([REFUSED, DOWN], 10) == Cause("unreachable: Connect to ipv4#127.0.0.1:1 failed: Connection refused")
    assert not decisive([REFUSED, DOWN])


def test_for_a_command_that_expects_a_dead_source_every_broker_refusing_is_final():
    assert decisive([REFUSED, DOWN], refusal_is_final=True)
    assert not decisive([REFUSED], refusal_is_final=True)  # other brokers may still answer
    assert not decisive([DOWN], refusal_is_final=True)  # closed connections are not refusals


def test_a_listener_of_another_protocol_and_silence_are_told_apart():
    assert cause([DOWN], 10).text.startswith("unreachable: the broker closed every connection")
    assert cause([], 7.5) == Cause("no answer within 8s")


def test_refused_means_it_answered_but_would_not_let_us_in():
    assert Reachability("dc3", "b:1", None, Cause.refused(Refusal.CREDENTIALS, "x"), 0.4).refused
    assert Reachability("dc3", "b:1", None, Cause.refused(Refusal.TLS, "x"), 0.1).refused
    assert not Reachability("dc3", "b:1", None, Cause.refused(Refusal.JAVA_SETTINGS, "x"), 0.1).refused
    assert not Reachability("dc3", "b:1", None, Cause("unreachable: x"), 0.1).refused
    assert not Reachability("dc3", "b:1", "id", None, 0.1).refused


def test_the_java_check_answer_maps_to_the_same_reasons():
    assert java_cause("error SaslAuthenticationException: Authentication failed during authentication", 10) \
        == Cause("authentication failed: Authentication failed during authentication", Refusal.CREDENTIALS)
    assert java_cause("error SslAuthenticationException: SSL handshake failed", 10) \
        == Cause("TLS handshake failed: SSL handshake failed", Refusal.TLS)
    assert java_cause("error TimeoutException: Timed out waiting for a node assignment.", 10) \
        == Cause("no answer within 10s")
    assert java_cause("error KafkaException: Failed to load SSL keystore /x of type JKS", 10) \
        == Cause("Java client settings refused: KafkaException: Failed to load SSL keystore /x of type JKS",
                 Refusal.JAVA_SETTINGS)


def test_one_line_per_cluster_names_which_client_family_failed():
    ok = Reachability("dc1", "b:1", "ID1", None, 0.2)
    assert check_line(ok, Reachability("dc1", "b:1", "ID1", None, 1.1)) == (
        True, "dc1: ok (cluster.id ID1, b:1, 0.2s, Java clients 1.1s)")
    java_refused = Reachability("dc1", "b:1", None, Cause.refused(Refusal.CREDENTIALS, "bad"), 0.9)
    assert check_line(ok, java_refused) == (False, "dc1: authentication failed: bad (b:1) [Spark's Java clients]")
    python_refused = Reachability("dc1", "b:1", None, Cause("unreachable: refused"), 0.0)
    assert check_line(python_refused, None) == (False, "dc1: unreachable: refused (b:1) [dr-stream's clients]")
    ok, line = check_line(ok, Reachability("dc1", "b:1", "OTHER", None, 1.0))
    assert not ok and "different clusters" in line


def test_a_failure_names_the_file_and_the_key_to_look_at():
    at = "/etc/dr-stream/flow.yaml: source"
    assert Reachability("dc1", "b:1", None, Cause("unreachable: refused"), 0.0, at).line() == (
        "dc1: unreachable: refused (b:1; /etc/dr-stream/flow.yaml: source.bootstrap_servers)")
    assert Reachability("dc1", "b:1", None, Cause("no answer within 10s"), 10.0, at).line().endswith(
        "source.bootstrap_servers)")
    assert Reachability("dc1", "b:1", None, Cause.refused(Refusal.CREDENTIALS, "bad"), 0.4, at).line().endswith(
        "; /etc/dr-stream/flow.yaml: source.kafka.sasl.jaas.config)")
    assert Reachability("dc1", "b:1", None, Cause.refused(Refusal.TLS, "x"), 0.1, at).line().endswith(
        "source.kafka.ssl.truststore.location)")
    assert Reachability("dc1", "b:1", "ID", None, 0.1, at).line() == "dc1: ok (cluster.id ID, b:1, 0.1s)"


def test_a_bad_bootstrap_address_fails_in_one_line_naming_cluster_file_and_key(tmp_path):
    import pytest
    import yaml

    from dr_stream.core.config import load_flow
    from dr_stream.kafka.reachability import ClusterAccessError, require_cluster_id

    path = tmp_path / "flow.yaml"
    # Nothing listens on port 1: the connection is refused at once.
    path.write_text(yaml.safe_dump({
        "source": {"alias": "dc1", "bootstrap_servers": "127.0.0.1:1"},
        "destination": {"alias": "dc2", "bootstrap_servers": "127.0.0.1:1"},
    }))
    with pytest.raises(ClusterAccessError) as failed:
        require_cluster_id(load_flow(path).source, timeout_s=2)
    line = str(failed.value)
    assert "\n" not in line
    assert line.startswith("dc1: unreachable: ") and "refused" in line
    assert line.endswith(f"(127.0.0.1:1; {path}: source.bootstrap_servers)")
