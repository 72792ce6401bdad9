"""`dr-stream run --metrics-port`: /metrics, /healthz and Spark's own metrics of a running flow,
as an operator's scraper and Kubernetes' probe see them (real brokers, real Spark, the CLI).

The destination is this module's own cluster (mx): the health test stops and restarts it.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import yaml
from confluent_kafka import TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from dr_stream.core.contracts import lag_topic
from dr_stream.kafka import clients
from dr_stream.runtime.paths import project_root
from tests.clusters import started_cluster
from tests.kafka_tools import consume_and_commit, count, create_topic, delete_topics, produce, unique, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mx(cluster_home):
    yield from started_cluster(cluster_home, "mx", 28092)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    status, text = get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


@pytest.fixture
def running(dc1, mx, tmp_path, request) -> Iterator[dict]:
    """A flow dc1 -> mx run by the command line (`--log-format` the test's parameter, else
    text), its ports and its console output."""
    topic = unique("mx.")
    create_topic(dc1.bootstrap, topic, partitions=3)
    port, ui = free_port(), free_port()
    name = unique("mx-flow-")
    path = tmp_path / "flow.yaml"
    path.write_text(yaml.safe_dump({
        "name": name, "source": {"alias": "dc1", "bootstrap_servers": dc1.bootstrap},
        "destination": {"alias": "mx", "bootstrap_servers": mx.bootstrap},
        "topics": {"include": [topic]}, "offsets": {"groups": {"include": ["mx-.*"]}},
        "streaming": {"checkpoint_dir": str(tmp_path / "cp"), "offset_index": str(tmp_path / "index"),
                      "trigger": "500ms"},
        "metrics": {"health_window": "10s", "sample_interval": "1s", "spark_ui_port": ui}}))
    out = open(tmp_path / "run.log", "w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "dr_stream.cli", "run", "--config", str(path), "--metrics-port", str(port),
         "--log-format", getattr(request, "param", "text")],
        stdout=out, stderr=subprocess.STDOUT, cwd=project_root(), start_new_session=True)
    try:
        yield {"topic": topic, "port": port, "ui": ui, "config": str(path), "process": process, "log": out,
               "name": name}
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        out.close()
        delete_topics(dc1.bootstrap, [topic])
        delete_topics(mx.bootstrap, [topic])


def test_a_running_flows_metrics_count_its_copy_its_lag_and_its_groups(running, dc1, mx):
    port, topic = running["port"], running["topic"]
    assert wait_until(lambda: get(f"http://127.0.0.1:{port}/healthz")[0] == 200, 120), running["log"]
    produce(dc1.bootstrap, topic, ({"value": f"v{i}".encode(), "partition": i % 3} for i in range(300)))
    assert wait_until(lambda: count(mx.bootstrap, topic) == 300, 60)
    consume_and_commit(dc1.bootstrap, topic, "mx-readers", {0: 60, 1: 50, 2: 40}, helper=False)

    def settled() -> bool:
        s = scrape(port)
        lags = [v for (n, labels), v in s.items() if n == "dr_stream_lag_records" and ("topic", topic) in labels]
        return (value(s, "dr_stream_records_copied_total", flow=running["name"], topic=topic) == 300
                and len(lags) == 3 and not any(lags)
                and (value(s, "dr_stream_groups_synced_total", flow=running["name"], action="committed") or 0) >= 3)

    assert wait_until(settled, 60)
    s = scrape(port)
    flow, query = running["name"], f"replicate-{running['name']}"
    assert value(s, "dr_stream_replication_latency_seconds_count", flow=flow) == 300
    assert 0 < value(s, "dr_stream_replication_latency_seconds_sum", flow=flow) < 300 * 30
    assert value(s, "dr_stream_lag_seconds", flow=flow, topic=topic, partition="0") == 0
    assert value(s, "dr_stream_query_active", flow=flow, query=query) == 1
    assert value(s, "dr_stream_query_restarts_total", flow=flow, query=query) == 0
    assert value(s, "dr_stream_records_skipped_total", flow=flow, reason="came_from_destination") == 0
    assert value(s, "dr_stream_translation_age_seconds", flow=flow, group="mx-readers") is not None
    assert value(s, "dr_stream_cluster_up", flow=flow, cluster="mx") == 1
    # each control loop's last round: what it covered, and a period at least twice its duration
    assert value(s, "dr_stream_loop_round_items", flow=flow, loop="poller") >= 1  # mx-readers at least
    assert value(s, "dr_stream_loop_round_items", flow=flow, loop="topics") >= 1
    for loop in ("poller", "topics", "lag", "translate"):
        took, period = (value(s, f"dr_stream_loop_{m}_seconds", flow=flow, loop=loop) for m in ("round", "period"))
        assert took is not None and period is not None and period >= took, (loop, took, period)
    for loop in ("poller", "topics", "lag"):  # paced loops: never closer than their round took
        took, period = (value(s, f"dr_stream_loop_{m}_seconds", flow=flow, loop=loop) for m in ("round", "period"))
        assert period >= 2 * took, (loop, took, period)
    # Spark's own streaming metrics, from its UI's Prometheus servlet
    status, spark_metrics = get(f"http://127.0.0.1:{running['ui']}/metrics/prometheus/")
    assert status == 200 and "spark_streaming" in spark_metrics and "inputRate" in spark_metrics


def _unhealthy(running: dict, mx) -> str:
    """Why the flow did not turn healthy: its health, whether mx runs, both logs' ends."""
    with open(running["log"].name, errors="replace") as log:  # not the flow's own handle: it writes there
        flow_log = log.read().splitlines()
    broker_log = mx.log_file.read_text(errors="replace").splitlines() if mx.log_file.exists() else []
    health = get(f"http://127.0.0.1:{running['port']}/healthz")
    return "\n".join([f"healthz: {health}", f"mx running: {mx.is_running()}", "flow log:", *flow_log[-40:],
                      "mx log:", *broker_log[-40:]])


def _lag_history_on(mx, flow: str) -> str:
    """What the flow's lag history topic on mx holds: whether it exists, its offsets, its last record's time."""
    topic = lag_topic(flow)
    with clients.consuming(mx.config, "lag-history-check") as consumer:
        if topic not in consumer.list_topics(timeout=10).topics:
            return f"\n{topic}: not on mx"
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, max(low, high - 1))])
        last = [m.timestamp()[1] for m in consumer.consume(1, timeout=5) if m.error() is None]
    return f"\n{topic}: offsets {low}..{high}, last record at {last[0] if last else None} ms (now {time.time():.0f} s)"


@pytest.mark.parametrize("running", ["json"], indirect=True)
def test_health_turns_503_when_the_destination_stops_and_200_when_it_returns(running, dc1, mx):
    port = running["port"]
    assert wait_until(lambda: get(f"http://127.0.0.1:{port}/healthz")[0] == 200, 120), running["log"]
    mx.stop()
    try:
        stopped = time.monotonic()
        assert wait_until(lambda: get(f"http://127.0.0.1:{port}/healthz")[0] == 503, 10 + 5), _unhealthy(running, mx)
        assert time.monotonic() - stopped <= 15
        reasons = json.loads(get(f"http://127.0.0.1:{port}/healthz")[1])["reasons"]
        assert "cluster mx does not answer" in reasons, _unhealthy(running, mx)
    finally:
        mx.start()
    assert wait_until(lambda: get(f"http://127.0.0.1:{port}/healthz")[0] == 200, 90), _unhealthy(running, mx)
    # the lag history the flow recorded while running draws as a plot
    plot = running["log"].name.replace("run.log", "lag.png")

    def drawn() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "dr_stream.cli", "status", "--config", running["config"],
                               "--plot", plot], capture_output=True, text=True, timeout=120, cwd=project_root())

    # samples the flow produced while mx was away reach it once its producer reconnects (a back-off
    # of up to 10 s), a little after the flow's admin client finds it again; a producer that still
    # holds them 20 s after is replaced (StuckQueue)
    assert wait_until(lambda: drawn().returncode == 0, 45, interval=2), \
        drawn().stderr + _lag_history_on(mx, running["name"])
    with open(plot, "rb") as png:
        assert png.read(8) == b"\x89PNG\r\n\x1a\n"
    running["process"].send_signal(signal.SIGTERM)
    assert running["process"].wait(60) == 0
    running["log"].seek(0)
    lines = [line for line in running["log"].read().splitlines() if line.strip()]
    # --log-format json: every line an object, dr-stream's and Spark's alike, but Java's own
    # start-up line about the incubator module Spark's launcher adds
    objects = [json.loads(line) for line in lines if not line.startswith("WARNING: Using incubator modules")]
    assert all(isinstance(o, dict) for o in objects) and len(objects) == len(lines) - 1
    said = [(o.get("flow"), o.get("message")) for o in objects]
    assert (running["name"], "clusters not answering: mx") in said
    assert (running["name"], "both clusters answer again") in said
