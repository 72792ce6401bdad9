"""A SASL_SSL flow, run as a user runs it, leaves its password nowhere but in the environment.

The flow runs as a real `./spark-submit.sh` process (driver and executors in one JVM, local
mode) with Spark's event log on and a metrics endpoint; then `status`, `drill` and `failover
--json` run as commands. The password is then looked for everywhere they wrote or printed: the
flow's output (driver's and executors' logs), every file of its state and of the event log, the
metrics page, and each command's output. (The pod spec on the dev Kubernetes is
`tests/kube/test_flow_in_pods.py`'s.)"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from dr_stream.runtime.paths import project_root
from tests.clusters import SEC_PASSWORD_VARIABLE, scram
from tests.kafka_tools import (
    committed,
    consume_and_commit,
    count,
    create_topic,
    delete_topics,
    produce,
    topic_exists,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dr_stream.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=project_root())


def _holding(root: Path, secret: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and secret in p.read_bytes()]


def test_a_sasl_ssl_flow_its_commands_metrics_state_and_event_log_never_hold_the_password(
        dc1, sec, pki, tmp_path: Path) -> None:
    secret = os.environ[SEC_PASSWORD_VARIABLE]
    topic, group = unique("hunt."), unique("sec-hunt-")
    state, events, port = tmp_path / "state", tmp_path / "events", _free_port()
    events.mkdir()
    flow = tmp_path / "hunt.yaml"
    flow.write_text(yaml.safe_dump({
        "name": "dc1-to-sec-hunt",
        "source": {"alias": "dc1", "bootstrap_servers": dc1.bootstrap},
        "destination": {"alias": "sec", "bootstrap_servers": sec.sasl_ssl_bootstrap, "kafka": scram(pki)},
        "topics": {"include": [topic]},
        "offsets": {"groups": {"include": ["sec-hunt-.*"]}},
        "streaming": {"checkpoint_dir": str(state / "checkpoints"), "offset_index": str(state / "offset-index"),
                      "trigger": "500ms"},
        "metrics": {"port": port},
    }))
    assert secret not in flow.read_text()
    create_topic(dc1.bootstrap, topic, partitions=2)
    produce(dc1.bootstrap, topic, ({"value": f"h{i}".encode(), "partition": i % 2} for i in range(300)))
    consume_and_commit(dc1.bootstrap, topic, group, {0: 100, 1: 90}, helper=False)
    log = tmp_path / "flow.log"
    with log.open("wb") as out:
        flow_process = subprocess.Popen(
            [str(project_root() / "spark-submit.sh"), str(flow), "--conf", "spark.eventLog.enabled=true",
             "--conf", f"spark.eventLog.dir=file://{events}", "--conf", "spark.eventLog.compress=false"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=project_root())
    outputs: list[str] = []
    try:
        assert wait_until(lambda: topic_exists(sec.bootstrap, topic) and count(sec.bootstrap, topic) == 300, 240), \
            log.read_text()[-3000:]
        assert wait_until(lambda: committed(sec.bootstrap, group, topic, 2) == {0: 100, 1: 90}, 120), \
            log.read_text()[-3000:]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
            metrics = page.read().decode()
        assert "dr_stream_" in metrics
        outputs.append(metrics)
        for command in (("status", "--config", str(flow), "--json"), ("drill", "--config", str(flow), "--json")):
            done = _cli(*command)
            assert done.returncode in (0, 2) and done.stdout.startswith("{"), done.stderr[-2000:]
            outputs += [done.stdout, done.stderr]
    finally:
        os.killpg(flow_process.pid, signal.SIGTERM)
        flow_process.wait(timeout=120)
    try:
        failover = _cli("failover", "--config", str(flow), "--group", group, "--json")
        assert failover.returncode == 0, failover.stderr[-3000:]
        assert {p["offset"] for p in json.loads(failover.stdout)["positions"]} == {100, 90}
        outputs += [failover.stdout, failover.stderr]
        # Spark 4 rolls its event log in a directory, beside an empty marker of the application's state
        event_logs = [p for p in events.rglob("events_*") if p.is_file()]
        assert event_logs and all(p.stat().st_size > 0 for p in event_logs), "no Spark event log written"
        # it holds the application's settings, each secret-like one redacted, and the queries' plans
        written = b"".join(p.read_bytes() for p in event_logs)
        assert b'"spark.redaction.regex":"*********(redacted)"' in written
        assert b"SparkListenerSQLExecutionStart" in written
        assert not [i for i, text in enumerate(outputs) if secret in text]
        assert secret not in log.read_text(errors="replace")
        assert not _holding(state, secret.encode()) and not _holding(events, secret.encode())
    finally:
        delete_topics(dc1.bootstrap, [topic])
        delete_topics(sec.bootstrap, [topic])
