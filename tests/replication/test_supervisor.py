"""A failed query is restarted while Spark runs, and never once Spark has stopped under the flow:
the flow then ends with one line (the rule with stand-ins; then a real flow whose SparkContext
is stopped from the JVM's side). Every restart is said, and a start that does not return is not
waited for (real flows, restarted and held by a listener of Spark's own)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from types import SimpleNamespace

import pytest
from pyspark.sql.streaming import StreamingQueryListener

from dr_stream.background import Background
from dr_stream.log_format import JsonFormatter
from dr_stream.replication.flow import build_flow
from dr_stream.replication.flow_metrics import FlowMetrics
from dr_stream.replication.query_start import QueryStart
from dr_stream.replication.supervisor import SparkStopped, _Supervised, _Supervisor, run_until_stopped, spark_running
from dr_stream.runtime.paths import project_root
from tests.flows import flow_config, one_topic_flow_file, running_flow
from tests.kafka_tools import consume_all, count, create_topic, produce, provenance, topic_exists, unique, wait_until
from tests.replication.test_flow_metrics import scrape


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


class _Starts(StreamingQueryListener):
    """Counts the starts Spark reports of one query; with `hold`, keeps its first start in this
    listener until released. Spark hands a query's start to each listener on the query's own thread
    before `start()` returns, so a listener that does not return holds `start()` with it."""

    def __init__(self, name: str, hold: bool = False) -> None:
        self.name, self.hold = name, hold
        self.count = 0
        self.released = threading.Event()

    def onQueryStarted(self, event) -> None:
        if event.name == self.name:
            self.count += 1
            if self.hold and self.count == 1:
                self.released.wait(120)

    def onQueryProgress(self, event) -> None:
        pass

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


def _said_running(lines: list[str]) -> int:
    return sum(1 for line in lines if "replicate query running after" in line)


@pytest.mark.integration
def test_every_restart_of_the_replicate_query_is_said_however_alike_its_lines(spark, dc1, dc2, topics, tmp_path):
    """A restart's line gives its phases' seconds, so quick restarts of an idle flow often say the
    same words: the flow's log once held such a line back as a repeat, and whoever waited for it (a
    test, an operator counting restarts) saw a start that never returned. Each start Spark reports
    has its line."""
    topic = unique("restarts.")
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, 3)
    config = flow_config(dc1, dc2, tmp_path, name="restarts", topics={"include": [topic.replace(".", "\\.")]},
                         streaming={"trigger": "100ms"})
    starts = _Starts(config.replicate_query)
    spark.streams.addListener(starts)
    lines: list[str] = []
    try:
        with running_flow(spark, config, log=lines.append) as flow:
            for restart in range(8):
                assert wait_until(lambda n=restart: _said_running(lines) == n + 1 and starts.count == n + 1, 60), \
                    "\n".join(line for line in lines if not line.startswith("batch "))
                flow.request_restart(f"test restart {restart + 1}")
            assert wait_until(lambda: _said_running(lines) == 9, 60), lines
    finally:
        spark.streams.removeListener(starts)
    assert _said_running(lines) == starts.count == 9


@pytest.mark.integration
def test_a_start_that_does_not_return_is_not_waited_for_and_the_query_spark_runs_is_supervised(
    spark, dc1, dc2, topics, tmp_path
):
    topic = unique("held.")
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, 1)
    produce(dc1.bootstrap, topic, ({"value": f"{i}".encode()} for i in range(100)))
    config = flow_config(dc1, dc2, tmp_path, name="held", topics={"include": [topic.replace(".", "\\.")]})
    held = _Starts(config.replicate_query, hold=True)
    spark.streams.addListener(held)
    lines: list[str] = []
    stop = threading.Event()
    flow = build_flow(config, spark, log=lines.append)
    runner = Background("held flow", lambda: run_until_stopped(flow, stop, start_wait_s=2)).start()
    try:
        assert wait_until(lambda: any("supervised from Spark's own state" in line for line in lines), 90), lines
        assert not any("replicate query running after" in line for line in lines), lines
        held.released.set()
        assert wait_until(lambda: topic_exists(dc2.bootstrap, topic) and count(dc2.bootstrap, topic) >= 100, 90), lines
        # the start returned in the end and said so, once
        assert wait_until(lambda: _said_running(lines) == 1, 30), lines
    finally:
        held.released.set()
        stop.set()
        runner.join(60)
        spark.streams.removeListener(held)
    unreturned = (("flow", "held"), ("query", config.replicate_query))
    assert scrape(flow.metrics)[("dr_stream_query_starts_unreturned_total", unreturned)] == 1
    said = next(line for line in lines if "supervised from Spark's own state" in line)
    assert said.startswith(f"{config.replicate_query}: its start has not returned after 2 s, but Spark runs the "
                           "query (run "), said
    assert "_start_query" in said, said  # where the start waits: inside the flow's own start
    copied = consume_all(dc2.bootstrap, topic)
    assert sorted(provenance(r)[-1]["offset"] for r in copied) == list(range(100))


class _Stoppable:
    def __init__(self, name: str = "q") -> None:
        self.name, self.runId, self.stopped = name, f"run-{name}", 0

    def stop(self) -> None:
        self.stopped += 1


def test_a_start_cancelled_before_it_returns_stops_its_query_when_it_does():
    query, release = _Stoppable(), threading.Event()

    def start() -> _Stoppable:
        release.wait(30)
        return query

    begun = QueryStart("translate-f", start)
    assert begun.cancel() is None  # not returned yet: nothing for the caller to stop
    release.set()
    assert begun.wait(30) and query.stopped == 1


def test_a_start_cancelled_after_it_returned_hands_its_query_to_the_caller():
    query = _Stoppable()
    begun = QueryStart("translate-f", lambda: query)
    assert begun.wait(30)
    assert begun.cancel() is query and query.stopped == 0


def test_a_part_whose_stop_fails_is_stopped_where_it_is_and_the_other_parts_still_stop():
    lines: list[str] = []
    running = {"replicate-f": _Stoppable("replicate-f"), "translate-f": _Stoppable("translate-f")}
    spark = SimpleNamespace(streams=SimpleNamespace(active=[]))
    flow = SimpleNamespace(metrics=FlowMetrics("f", "replicate-f"), log=lines.append, spark=spark)
    parts = [_Supervised(name, lambda: None, query=q, restart_at=None) for name, q in running.items()]
    supervisor = _Supervisor(flow, max_backoff_s=30, parts=parts)
    between: list[str] = []

    def stop_between_batches(query, grace_s=0.0) -> None:
        if query.name == "replicate-f":
            spark.streams.active = [query]  # still running: the stop did not reach it
            raise RuntimeError("py4j: the call was refused")
        between.append(query.name)

    supervisor._stop_between_batches = stop_between_batches  # type: ignore[method-assign]
    supervisor.stop()
    assert between == ["translate-f"]
    assert running["replicate-f"].stopped == 1  # stopped at once, not left running under its name
    assert lines == ["replicate-f: its stop between batches failed (py4j: the call was refused); it is stopped "
                     "where it is"]


@pytest.mark.integration
def test_a_query_left_running_under_the_flows_name_is_stopped_and_the_flow_starts_its_own(spark, dc1, dc2, topics,
                                                                                           tmp_path):
    """An earlier start that no one supervises any more (its flow stopped before the start
    returned) once kept a translate query of the flow's name running, so every later flow of that
    name failed to start its own, retrying each second, and translated only what its poller handed
    over."""
    topic = unique("orphan.")
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, 1)
    config = flow_config(dc1, dc2, tmp_path, name="orphan", topics={"include": [topic.replace(".", "\\.")]})
    left = (spark.readStream.format("rate").option("rowsPerSecond", 1).load().writeStream
            .queryName(config.translate_query).format("noop")
            .option("checkpointLocation", str(tmp_path / "left")).start())
    lines: list[str] = []
    try:
        with running_flow(spark, config, log=lines.append):
            def own() -> bool:
                found = next((q for q in spark.streams.active if q.name == config.translate_query), None)
                return found is not None and found.runId != left.runId

            assert wait_until(own, 60), lines
            assert not left.isActive
            said = [line for line in lines if "an earlier run of it" in line]
            assert said and said[0].startswith(f"{config.translate_query} could not start: an earlier run of it "
                                               f"(run {left.runId}) still runs"), lines
    finally:
        left.stop()
