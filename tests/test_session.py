"""The Spark session never shows a Kafka secret in a query plan (explain, SQL tab, event log)."""

from __future__ import annotations

from dr_stream.config import parse_flow
from dr_stream.kafka import spark_options

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="drs" '
        'password="plan-secret-7781";')


def test_a_jaas_password_and_key_material_in_kafka_options_are_redacted_in_plans(spark):
    config = parse_flow({
        "source": {"alias": "a", "bootstrap_servers": "127.0.0.1:1", "kafka": {
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": JAAS,
            "ssl.truststore.type": "PEM", "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----cert-7781",
            "ssl.keystore.type": "PEM", "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----key-7781",
            "ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----chain"}},
        "destination": {"alias": "b", "bootstrap_servers": "127.0.0.1:2"},
    })
    stream = spark.readStream.format("kafka").options(**spark_options.replicate_source(config)).load()
    plan = stream._jdf.queryExecution().toString()
    assert "kafka.sasl.jaas.config=*********(redacted)" in plan
    assert "7781" not in plan
