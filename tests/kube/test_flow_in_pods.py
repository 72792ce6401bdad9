"""A flow in pods on the dev Kubernetes, as docs/deploying.md shows it: the shipped StatefulSet
(deploy/kubernetes/flow-statefulset.yaml, adapted to this cluster by `dev k8s up`) runs the
driver in a pod that Kubernetes brings back when it is deleted; the copy resumes exactly once,
and the CLI reads the flow's state on HDFS. `make test-k8s` runs it (with `pytest -s` it prints
the times the docs quote)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dr_stream.dev.hadoop import LocalHadoop
from dr_stream.dev.kube import LocalKube
from dr_stream.runtime.paths import project_root
from tests.kafka_tools import (
    committed,
    consume_all,
    consume_and_commit,
    count,
    create_topic,
    produce,
    provenance,
    topic_exists,
    unique,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.kube]
STATEFULSET = "dr-stream-dc1-to-dc2"
DRIVER = f"{STATEFULSET}-0"
DOCS = project_root() / "docs" / "deploying.md"


@pytest.fixture(scope="module")
def hadoop(cluster_home: Path) -> Iterator[LocalHadoop]:
    cluster = LocalHadoop(cluster_home / "hadoop-k8s", 21800)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def documented_commands() -> list[str]:
    """The commands of the docs' block that runs a flow on the dev Kubernetes, one per line."""
    text = DOCS.read_text()
    block = re.search(r"<!-- dev-k8s-flow -->\s*```\n(.*?)```", text, re.S)
    assert block, f"{DOCS}: no block after <!-- dev-k8s-flow -->"
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


class Shell:
    """Runs the docs' commands as written, with the dev cluster's files where they name
    `.cache/dev/k8s/`, the test's flow file where they name FLOW.yaml and its group for GROUP."""

    def __init__(self, kube: LocalKube, hadoop: LocalHadoop, flow: Path, group: str) -> None:
        self.kube, self.flow, self.group = kube, flow, group
        self.env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig), "HADOOP_CONF_DIR": str(hadoop.conf_dir),
                    "PATH": f"{kube.kubectl_dir}:{project_root() / '.venv' / 'bin'}:{os.environ['PATH']}"}
        self.ran: list[str] = []

    def __call__(self, command: str, timeout: float = 300) -> subprocess.CompletedProcess:
        self.ran.append(command)
        line = self.line(command)
        done = subprocess.run(["bash", "-c", line], env=self.env, cwd=project_root(), capture_output=True,
                              text=True, timeout=timeout)
        assert done.returncode == 0, f"{line}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
        return done

    def line(self, command: str) -> str:
        return (command.replace(".cache/dev/k8s/", f"{self.kube.home}/").replace("FLOW.yaml", str(self.flow))
                .replace("GROUP", self.group))

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        """dr-stream on this machine, beside the docs' commands (not one of them)."""
        return subprocess.run(["dr-stream", *args], env=self.env, capture_output=True, text=True, timeout=300)


def _pod(kube: LocalKube, name: str) -> dict | None:
    found = kube.kubectl("get", "pod", name, "-o", "json", "--ignore-not-found")
    return json.loads(found) if found.strip() else None


def _driver_log(kube: LocalKube) -> str:
    return kube.kubectl("logs", DRIVER, "--tail=60", check=False)


def test_a_deleted_driver_pod_is_brought_back_and_resumes_the_copy_exactly_once(
        kube: LocalKube, hadoop: LocalHadoop, dc1, dc2, topics, tmp_path: Path) -> None:
    total = 60_000
    topic = unique("k8s.flow.")
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, 3)
    produce(dc1.bootstrap, topic, ({"value": f"{i:08d}".encode() * 8, "partition": i % 3} for i in range(total)))
    group = unique("k8s-group-")
    consume_and_commit(dc1.bootstrap, topic, group, {p: 1000 for p in range(3)}, helper=False)
    state = f"{hadoop.fs_uri}/dr-stream/k8s-flow"
    flow = tmp_path / "FLOW.yaml"
    # Small batches keep the copy going long enough to be interrupted.
    flow.write_text(yaml.safe_dump({
        "name": "k8s-flow",
        "source": {"alias": "dc1", "bootstrap_servers": dc1.bootstrap},
        "destination": {"alias": "dc2", "bootstrap_servers": dc2.bootstrap},
        "topics": {"include": [re.escape(topic)]},
        "streaming": {"checkpoint_dir": f"{state}/checkpoints", "offset_index": f"{state}/offset-index",
                      "trigger": "200ms", "max_records_per_batch": 1500},
        "metrics": {"port": 9404},  # the StatefulSet's probes ask /healthz there
    }))
    commands = documented_commands()
    shell = Shell(kube, hadoop, flow, group)
    began = time.monotonic()
    try:
        shell(commands[0])  # the flow file as a ConfigMap
        shell(commands[1])  # the StatefulSet
        shell(commands[2], timeout=400)  # ready: copying, both clusters answer
        print(f"\nk8s: apply to a ready driver pod {time.monotonic() - began:.1f}s")
        first = _pod(kube, DRIVER)
        assert first is not None
        assert wait_until(lambda: topic_exists(dc2.bootstrap, topic) and count(dc2.bootstrap, topic) >= 6000, 240), \
            _driver_log(kube)
        executors = [p for p in json.loads(kube.kubectl("get", "pods", "-o", "json"))["items"]
                     if any(o["uid"] == first["metadata"]["uid"] for o in p["metadata"].get("ownerReferences", []))]
        assert executors, "no executor pod owned by the driver pod"

        deleted_at = time.monotonic()
        shell(commands[3])  # delete the driver pod, as a lost node would
        at_delete = count(dc2.bootstrap, topic)
        assert at_delete < total, "the copy finished before the delete; the test proves nothing"

        def replaced() -> bool:
            pod = _pod(kube, DRIVER)
            return (pod is not None and pod["metadata"]["uid"] != first["metadata"]["uid"]
                    and pod["status"].get("phase") == "Running")

        assert wait_until(replaced, 120, interval=1), kube.kubectl("get", "pods", "-o", "wide")
        # the old driver's executors went with it
        old = {p["metadata"]["name"] for p in executors}
        assert wait_until(lambda: not old & set(kube.kubectl("get", "pods", "-o", "name").replace("pod/", "").split()),
                          120), kube.kubectl("get", "pods")
        settled = count(dc2.bootstrap, topic)
        assert wait_until(lambda: count(dc2.bootstrap, topic) > settled, 240), _driver_log(kube)
        print(f"k8s restart: delete of the driver pod to records flowing again {time.monotonic() - deleted_at:.1f}s "
              f"({at_delete} of {total} copied at the delete)")
        assert wait_until(lambda: count(dc2.bootstrap, topic) >= total, 240), _driver_log(kube)
        time.sleep(3)  # anything duplicated would land now
        records = consume_all(dc2.bootstrap, topic)
        origins = Counter((r.partition, provenance(r)[-1]["offset"]) for r in records)
        assert len(records) == total, f"{len(records) - total:+d} records"
        assert set(origins.values()) == {1}

        # the CLI on this machine reads the flow's state on HDFS
        def translated() -> dict[int, int]:
            done = shell.cli("translate", "--config", str(flow), "--group", group, "--json")
            assert done.returncode == 0, done.stderr[-2000:]
            return {p["partition"]: p["offset"] for p in json.loads(done.stdout)["positions"]}

        assert wait_until(lambda: translated() == {0: 1000, 1: 1000, 2: 1000}, 120, interval=2), translated()
        status = shell(commands[4])
        assert f"{topic}" in status.stdout, status.stdout
        caught_up = shell.cli("status", "--config", str(flow), "--json", "--max-lag-records", "0")
        assert caught_up.returncode == 0, caught_up.stdout[-3000:]
        lags = json.loads(caught_up.stdout)["replication"]
        assert {(lag["partition"], lag["lag_records"]) for lag in lags} == {(0, 0), (1, 0), (2, 0)}
        failover = shell(commands[5])
        assert group in failover.stdout, failover.stdout
        assert committed(dc2.bootstrap, group, topic, 3) == {0: 1000, 1: 1000, 2: 1000}
    finally:
        shell(commands[6], timeout=180)  # the StatefulSet and the ConfigMap deleted
    assert wait_until(lambda: kube.kubectl("get", "pods", "-o", "name").strip() == "", 120), \
        kube.kubectl("get", "pods")
    assert shell.ran == commands, "every command the docs show ran, in their order"
