"""A failed query is restarted while Spark runs, and never once Spark has stopped under the flow:
the flow then ends with one line (the rule with stand-ins; then a real flow whose SparkContext
is stopped from the JVM's side)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from datetime import datetime, timedelta
from types import SimpleNamespace

import pytest

from dr_stream.log_format import JsonFormatter
from dr_stream.replication.flow_metrics import FlowMetrics
from dr_stream.replication.supervisor import SparkStopped, _Supervised, _Supervisor, spark_running
from dr_stream.runtime.paths import project_root
from tests.flows import one_topic_flow_file
from tests.kafka_tools import count, create_topic, produce, topic_exists, unique, wait_until


class _Query:
    isActive = False

    def exception(self) -> str:
        return "Job 12 cancelled because SparkContext was shut down"


def _supervisor(running: bool, lines: list[str], starts: list[int]) -> _Supervisor:
    flow = SimpleNamespace(metrics=FlowMetrics("f", "replicate-f"), log=lines.append, take_restart_request=lambda: None)

    def start() -> _Query:
        starts.append(1)
        return _Query()

    part = _Supervised("replicate-f", start, query=_Query(), restart_at=None, started_at=time.monotonic())
    return _Supervisor(flow, max_backoff_s=30, parts=[part], running=lambda: running)


def test_a_failed_query_is_restarted_from_its_checkpoint_while_spark_runs():
    lines: list[str] = []
    starts: list[int] = []
    supervisor = _supervisor(True, lines, starts)
    supervisor.check()
    assert lines == ["replicate-f failed: Job 12 cancelled because SparkContext was shut down; "
                     "restarting from its checkpoint in 1s"]
    supervisor.parts[0].restart_at = 0.0  # the backoff is over
    supervisor.check()
    assert starts == [1]


def test_once_spark_has_stopped_a_failed_query_is_not_restarted_and_the_flow_is_told_to_end():
    lines: list[str] = []
    starts: list[int] = []
    supervisor = _supervisor(False, lines, starts)
    supervisor.parts[0].restart_at = 0.0  # even a restart already due is not attempted
    with pytest.raises(SparkStopped, match="Spark stopped under the flow"):
        supervisor.check()
    assert starts == [] and lines == []


def test_a_session_whose_jvm_refuses_calls_is_not_running():
    class Gone:
        @property
        def sparkContext(self):
            raise ConnectionRefusedError("the gateway is gone")

    assert spark_running(Gone()) is False


@pytest.mark.integration
def test_a_flow_whose_spark_context_is_stopped_under_it_ends_with_one_line_and_restarts_nothing(dc1, dc2, topics,
                                                                                                  tmp_path):
    topic = unique("stopped.")
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, 1)
    produce(dc1.bootstrap, topic, ({"value": f"{i}".encode()} for i in range(100)))
    config = one_topic_flow_file(tmp_path, "stopped-spark", dc1.bootstrap, dc2.bootstrap, topic)
    log = tmp_path / "flow.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tests.replication.stop_spark_under_a_flow", str(config)],
                                stdout=out, stderr=subprocess.STDOUT, cwd=project_root())
    try:
        copied = wait_until(lambda: topic_exists(dc2.bootstrap, topic) and count(dc2.bootstrap, topic) >= 100, 180)
        assert copied, log.read_text()[-3000:]
        (tmp_path / "flow.yaml.stop-spark").touch()
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert code == 3, text[-3000:]
    assert text.count("Spark stopped under the flow") == 1, text[-3000:]
    assert "restarting from its checkpoint" not in text and "could not start" not in text, text[-3000:]


@pytest.mark.integration
def test_the_jvm_says_its_stop_line_as_the_flows_own_in_text_and_in_json(spark):
    jvm = spark._jvm.io.drstream.spark.StopBetweenBatches
    assert jvm.line("f-1", False, "stopping: query q finishes") == "[f-1] stopping: query q finishes"
    message = 'a "quoted" \\ path\nand a tab\t'
    said = json.loads(jvm.line("f-1", True, message))
    own = json.loads(JsonFormatter().format(logging.LogRecord("dr_stream.flow.f-1", logging.INFO, "", 0, message,
                                                              None, None)))
    assert said.keys() == own.keys()
    assert {k: said[k] for k in ("level", "logger", "flow", "message")} == \
        {k: own[k] for k in ("level", "logger", "flow", "message")}
    at = datetime.fromisoformat(said["time"])
    assert at.utcoffset() == timedelta(0) and abs(at - datetime.fromisoformat(own["time"])) < timedelta(minutes=1)
