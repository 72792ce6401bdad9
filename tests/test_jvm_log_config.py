"""What Spark's JVMs print (dr_stream/runtime/log4j2*.properties): the two configurations hold
the same loggers, and the sink producer's retry lines are dropped while its other warnings stay."""

from __future__ import annotations

import re

from dr_stream.runtime.paths import project_root

RUNTIME = project_root() / "dr_stream" / "runtime"
SENDER = "logger.sender"


def loggers(name: str) -> dict[str, str]:
    lines = (RUNTIME / name).read_text().splitlines()
    pairs = (line.split("=", 1) for line in lines if line.startswith("logger.") and "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def test_the_console_and_json_configurations_hold_the_same_loggers():
    assert loggers("log4j2.properties") == loggers("log4j2-json.properties")


def test_the_sink_producers_retries_after_a_broker_restart_are_not_printed():
    config = loggers("log4j2.properties")
    assert config[f"{SENDER}.name"] == "org.apache.kafka.clients.producer.internals.Sender"
    assert config[f"{SENDER}.filter.retried.onMatch"] == "DENY"
    dropped = re.compile(config[f"{SENDER}.filter.retried.regex"])
    # the lines Kafka's Sender writes, as a destination broker restart left them
    assert dropped.fullmatch("[Producer clientId=producer-1] Got error produce response with correlation id 43606 on "
                             "topic-partition sc.t000-7, retrying (2147483646 attempts left). Error: "
                             "NOT_LEADER_OR_FOLLOWER")
    assert dropped.fullmatch("[Producer clientId=producer-1] Received invalid metadata error in produce request on "
                             "partition sc.t000-7 due to org.apache.kafka.common.errors.NotLeaderOrFollowerException: "
                             "For requests intended only for the leader. Going to request metadata update now")
    assert not dropped.fullmatch("[Producer clientId=producer-1] Uncaught error in kafka producer I/O thread: ")
