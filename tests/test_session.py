"""The Spark session never shows a Kafka secret in a query plan (explain, SQL tab, event log), and
starts again when it lost Spark's own UI start-up race on YARN."""

from __future__ import annotations

import logging

import pytest

from dr_stream.core.config import parse_flow
from dr_stream.kafka import spark_options
from dr_stream.runtime.session import is_ui_start_race, started

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


RACE = ("An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
        ": java.util.ConcurrentModificationException\n\tat java.base/java.util.ArrayList...\n"
        "\tat org.apache.spark.ui.SparkUI.attachAllHandlers(SparkUI.scala:81)\n")


class _Starts:
    """A session factory failing with the given errors before it succeeds."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "session"


def test_a_session_lost_to_the_yarn_ui_start_up_race_is_started_again_and_said(caplog):
    starts = _Starts(RuntimeError(RACE))
    logger = logging.getLogger("dr_stream.runtime.session")
    logger.addHandler(caplog.handler)  # the flow's text format stops dr_stream's lines at its own root
    try:
        assert started(starts) == "session"
    finally:
        logger.removeHandler(caplog.handler)
    assert starts.calls == 2
    assert "starting the session again (2 of 3)" in caplog.text


def test_any_other_start_failure_is_raised_at_once():
    starts = _Starts(RuntimeError("java.net.ConnectException: Connection refused"))
    with pytest.raises(RuntimeError, match="Connection refused"):
        started(starts)
    assert starts.calls == 1


def test_the_race_is_retried_a_bounded_number_of_times():
    starts = _Starts(*(RuntimeError(RACE) for _ in range(5)))
    with pytest.raises(RuntimeError, match="ConcurrentModificationException"):
        started(starts, attempts=3)
    assert starts.calls == 3


def test_a_concurrent_modification_elsewhere_is_not_the_ui_race():
    assert is_ui_start_race(RuntimeError(RACE))
    assert not is_ui_start_race(RuntimeError("java.util.ConcurrentModificationException\n\tat scala.collection"))


def test_the_ui_of_a_flow_shows_jobs_and_cannot_kill_them(spark):
    assert spark.conf.get("spark.ui.killEnabled") == "false"
