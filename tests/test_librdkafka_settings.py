"""Java client properties -> librdkafka settings: every mapping and every refusal."""

from __future__ import annotations

import pytest

from dr_stream.core.librdkafka_settings import ClientSettingsError, derive, parse_jaas

SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="drs" password="s3cr\\"et";'


def no_store(location, kind, password):
    raise AssertionError("no truststore should be read")


def test_plaintext_needs_nothing_and_java_only_keys_stay_with_the_java_clients():
    d = derive({"acks": "all", "client.id": "drs"}, None, no_store)
    assert d == {"client.id": "drs"}


def test_scram_over_tls_with_a_pem_truststore_file():
    d = derive({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM,
                "ssl.truststore.type": "PEM", "ssl.truststore.location": "/etc/kafka/ca.pem"}, None, no_store)
    assert d == {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
                          "sasl.username": "drs", "sasl.password": 's3cr"et', "ssl.ca.location": "/etc/kafka/ca.pem"}


def test_plain_login_with_unquoted_options_and_the_librdkafka_map_overriding():
    jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required username=alice password=pw;"
    d = derive({"security.protocol": "sasl_plaintext", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas},
               {"sasl.username": "bob", "debug": "security"}, no_store)
    assert d == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                          "sasl.username": "bob", "sasl.password": "pw", "debug": "security"}


def test_jks_and_pkcs12_truststores_are_read_as_pem_and_inline_pem_is_used_as_is():
    read = []

    def reader(location, kind, password):
        read.append((location, kind, password))
        return "PEM"

    d = derive({"security.protocol": "SSL", "ssl.truststore.location": "/t.jks", "ssl.truststore.password": "x"},
               None, reader)
    assert d["ssl.ca.pem"] == "PEM" and read == [("/t.jks", "JKS", "x")]
    d = derive({"security.protocol": "SSL", "ssl.truststore.type": "PKCS12", "ssl.truststore.location": "/t.p12"},
               None, reader)
    assert read[-1] == ("/t.p12", "PKCS12", None)
    d = derive({"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.certificates": "-----B"},
               None, no_store)
    assert d == {"security.protocol": "SSL", "ssl.ca.pem": "-----B"}


def test_client_certificates_from_pkcs12_pem_file_and_inline_pem():
    base = {"security.protocol": "SSL", "ssl.truststore.certificates": "CA"}
    d = derive({**base, "ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/k.p12",
                "ssl.keystore.password": "kp"}, None, no_store)
    assert d["ssl.keystore.location"] == "/k.p12" and d["ssl.keystore.password"] == "kp"
    d = derive({**base, "ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem", "ssl.key.password": "kp"},
               None, no_store)
    assert (d["ssl.certificate.location"], d["ssl.key.location"], d["ssl.key.password"]) \
        == ("/k.pem", "/k.pem", "kp")
    d = derive({**base, "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "C", "ssl.keystore.key": "K"},
               None, no_store)
    assert (d["ssl.certificate.pem"], d["ssl.key.pem"]) == ("C", "K")


def test_hostname_verification_off_is_none_for_librdkafka():
    d = derive({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": ""}, None, no_store)
    assert d["ssl.endpoint.identification.algorithm"] == "none"


def test_oauthbearer_client_credentials_and_unsecured_jwt():
    jaas = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="app" '
            'clientSecret="cs" scope="kafka" extension_logicalCluster="lkc-1";')
    d = derive({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": jaas,
                "sasl.oauthbearer.token.endpoint.url": "https://idp/token"}, None, no_store)
    assert d["sasl.oauthbearer.method"] == "oidc"
    assert d["sasl.oauthbearer.client.secret"] == "cs"
    assert d["sasl.oauthbearer.extensions"] == "logicalCluster=lkc-1"
    jaas = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
            'unsecuredLoginStringClaim_sub="alice";')
    d = derive({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": jaas},
               None, no_store)
    assert d["sasl.oauthbearer.config"] == "principal=alice"


@pytest.mark.parametrize(("java", "key", "says"), [
    ({"security.protocol": "SASL_SSL"}, "sasl.mechanism", "GSSAPI"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}, "sasl.jaas.config", "is required"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
      "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required username=a password=b;"},
     "sasl.jaas.config", "ScramLoginModule"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required username=a;"},
     "sasl.jaas.config", "password"),
    ({"security.protocol": "SSL", "ssl.keystore.location": "/k.jks"}, "ssl.keystore.type", "PKCS12"),
    ({"security.protocol": "TLS"}, "security.protocol", "SASL_SSL"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "username=a"},
     "sasl.jaas.config", "not of the form"),
])
def test_what_cannot_be_derived_is_one_line_naming_the_key_and_never_the_secret(java, key, says):
    with pytest.raises(ClientSettingsError) as error:
        derive(java, None, no_store)
    assert error.value.key == key
    assert says in str(error.value)
    assert "\n" not in str(error.value) and "password=b" not in str(error.value)


def test_jaas_options_with_escaped_quotes_and_spaces():
    module, options = parse_jaas('a.B required  k1="v 1"   k2="q\\"x" k3=bare ;')
    assert module == "a.B" and options == {"k1": "v 1", "k2": 'q"x', "k3": "bare"}

