"""A flow in pods on the dev Kubernetes, by the README's commands as written: the shipped
StatefulSet (deploy/kubernetes/flow-statefulset.yaml, adapted to this cluster by `dev k8s up`)
runs the driver in a pod that Kubernetes brings back when it is deleted; the copy resumes
exactly once, and the CLI reads the flow's state on HDFS. `make test-k8s` runs it (with
`pytest -s` it prints the times the docs quote)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from dr_stream.dev.hadoop import LocalHadoop
from dr_stream.dev.kube import LocalKube
from dr_stream.runtime.paths import project_root
from tests.kafka_tools import (
    assert_copied_exactly_once,
    committed,
    consume_and_commit,
    count,
    create_topic,
    produce,
    topic_exists,
    unique,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.kube]
STATEFULSET = "dr-stream-dc1-to-dc2"
DRIVER = f"{STATEFULSET}-0"
README = project_root() / "README.md"
FLOW = "conf/dc1-to-dc2-k8s.yaml"


def readme_commands() -> list[str]:
    """The README's commands that run a flow on the dev Kubernetes, one per line."""
    block = re.search(r"<!-- dev-k8s-flow -->\s*```\n(.*?)```", README.read_text(), re.S)
    assert block, f"{README}: no block after <!-- dev-k8s-flow -->"
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


class Shell:
    """Runs the README's commands as written, each after its `export` line, from the checkout;
    the dev cluster's files are this test's cluster's and the flow file is this test's (its own
    Kafka clusters, HDFS and topic), wherever the commands name them."""

    def __init__(self, kube: LocalKube, flow: Path, export: str) -> None:
        self.kube, self.flow, self.export = kube, flow, export
        self.env = {**os.environ, "PATH": f"{project_root() / '.venv' / 'bin'}:{os.environ['PATH']}"}
        self.env.pop("KUBECONFIG", None)
        self.ran: list[str] = []

    def __call__(self, command: str, timeout: float = 300) -> subprocess.CompletedProcess:
        self.ran.append(command)
        line = self.line(f"{self.export}; {command}")
        done = subprocess.run(["bash", "-c", line], env=self.env, cwd=project_root(), capture_output=True,
                              text=True, timeout=timeout)
        assert done.returncode == 0, f"{line}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
        return done

    def line(self, command: str) -> str:
        home = str(self.kube.home)
        return (command.replace("$PWD/.cache/dev/k8s", home).replace(".cache/dev/k8s", home)
                .replace(FLOW, str(self.flow)))

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        """dr-stream on this machine, beside the docs' commands (not one of them)."""
        return subprocess.run(["dr-stream", *args], env=self.env, capture_output=True, text=True, timeout=300)


def _pod(kube: LocalKube, name: str) -> dict | None:
    found = kube.kubectl("get", "pod", name, "-o", "json", "--ignore-not-found")
    return json.loads(found) if found.strip() else None


def _no_errors(log: str) -> None:
    """A driver that starts, copies and resumes as it should logs no error (Spark's own included:
    a readiness probe on the driver makes Spark log one at every start)."""
    assert not [line for line in log.splitlines() if " ERROR " in line], log[-5000:]


def _driver_log(kube: LocalKube, pod: str = DRIVER) -> str:
    """The driver's last lines without the stack frames, which would push out what went wrong."""
    lines = kube.kubectl("logs", pod, "--tail=400", check=False).splitlines()
    return "\n".join([line for line in lines if not line.lstrip().startswith("at ")][-80:])


def _pods(kube: LocalKube, role: str) -> list[dict]:
    """The pods of Spark's `role` (driver, executor)."""
    pods = json.loads(kube.kubectl("get", "pods", "-o", "json"))["items"]
    return [p for p in pods if p["metadata"]["labels"].get("spark-role") == role]


def _rpc_secured(driver: dict, executors: list[dict]) -> None:
    """Spark's RPC between the driver and its executors is authenticated with the secret of the
    mounted `-rpc` Secret: no pod's spec holds a secret Spark generated."""
    for pod in [driver, *executors]:
        env = {e["name"] for c in pod["spec"]["containers"] for e in c.get("env", [])}
        assert "_SPARK_AUTH_SECRET" not in env, f"{pod['metadata']['name']}: Spark's RPC secret in the pod spec"
    for pod in executors:
        volumes = {v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v}
        assert any(name.endswith("-rpc") for name in volumes), pod["spec"]["volumes"]
        # what an executor starts with (its copy only works if its secret is the driver's)
        options = {e.get("value") for c in pod["spec"]["containers"] for e in c.get("env", [])}
        assert {"-Dspark.authenticate=true", "-Dspark.network.crypto.enabled=true",
                "-Dspark.authenticate.secret.executor.file=/etc/dr-stream/rpc/secret"} <= options, options


def _flow_file(path: Path, hadoop: LocalHadoop, dc1, dc2, topic: str, state: str) -> Path:
    """The README's flow file on this test's clusters, topic and HDFS (state under /dr-stream/`state`);
    small batches keep the copy going long enough to be interrupted."""
    settings = yaml.safe_load((project_root() / FLOW).read_text())
    settings["source"]["bootstrap_servers"] = dc1.bootstrap
    settings["destination"]["bootstrap_servers"] = dc2.bootstrap
    settings["topics"]["include"] = [re.escape(topic)]
    settings["streaming"].update(
        {key: value.replace("hdfs://localhost:19800/dr-stream/dc1-to-dc2-k8s", f"{hadoop.fs_uri}/dr-stream/{state}")
         for key, value in settings["streaming"].items()
         if isinstance(value, str) and value.startswith("hdfs://localhost:19800/")},
        trigger="200ms", max_records_per_batch=1500)
    assert all(settings["streaming"][key].startswith(hadoop.fs_uri) for key in ("checkpoint_dir", "offset_index"))
    path.write_text(yaml.safe_dump(settings))
    return path


def _source_topic(dc1, topics: list[str], total: int) -> str:
    topic = unique("k8s.flow.")
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, 3)
    produce(dc1.bootstrap, topic, ({"value": f"{i:08d}".encode() * 8, "partition": i % 3} for i in range(total)))
    return topic


def test_a_deleted_driver_pod_is_brought_back_and_resumes_the_copy_exactly_once(
        kube: LocalKube, hadoop: LocalHadoop, dc1, dc2, topics, tmp_path: Path) -> None:
    total = 60_000
    topic = _source_topic(dc1, topics, total)
    group = unique("k8s-group-")
    consume_and_commit(dc1.bootstrap, topic, group, {p: 1000 for p in range(3)}, helper=False)
    flow = _flow_file(tmp_path / "flow.yaml", hadoop, dc1, dc2, topic, "dc1-to-dc2-k8s")
    commands = readme_commands()
    # The first line starts the dev clusters; the fixtures stand for it, with clusters of their own.
    assert commands[0] == "dr-stream dev up && dr-stream dev yarn up && dr-stream dev k8s up"
    assert commands[1].startswith("export KUBECONFIG=")
    shell = Shell(kube, flow, commands[1])
    began = time.monotonic()
    try:
        shell(commands[2])  # Spark's RPC secret as a Secret
        shell(commands[3])  # the flow file as a ConfigMap
        shell(commands[4])  # the StatefulSet
        shell(commands[5], timeout=400)  # the driver pod runs
        first = _pod(kube, DRIVER)
        assert first is not None
        assert wait_until(lambda: topic_exists(dc2.bootstrap, topic) and count(dc2.bootstrap, topic) > 0, 240), \
            _driver_log(kube)
        print(f"\nk8s: apply to the first copied record {time.monotonic() - began:.1f}s")
        assert wait_until(lambda: count(dc2.bootstrap, topic) >= 6000, 240), _driver_log(kube)
        _no_errors(kube.kubectl("logs", DRIVER))
        executors = [p for p in json.loads(kube.kubectl("get", "pods", "-o", "json"))["items"]
                     if any(o["uid"] == first["metadata"]["uid"] for o in p["metadata"].get("ownerReferences", []))]
        assert executors, "no executor pod owned by the driver pod"

        deleted_at = time.monotonic()
        _rpc_secured(first, executors)
        shell(commands[6])  # delete the driver pod, as a lost node would
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
        assert_copied_exactly_once(dc2.bootstrap, topic, total)
        _no_errors(kube.kubectl("logs", DRIVER))  # the second driver's

        # the CLI on this machine reads the flow's state on HDFS
        def translated() -> dict[int, int]:
            done = shell.cli("translate", "--config", str(flow), "--group", group, "--json")
            assert done.returncode == 0, done.stderr[-2000:]
            return {p["partition"]: p["offset"] for p in json.loads(done.stdout)["positions"]}

        assert wait_until(lambda: translated() == {0: 1000, 1: 1000, 2: 1000}, 120, interval=2), translated()
        status = shell(commands[7])
        assert f"{topic}" in status.stdout, status.stdout
        caught_up = shell.cli("status", "--config", str(flow), "--json", "--max-lag-records", "0")
        assert caught_up.returncode == 0, caught_up.stdout[-3000:]
        lags = json.loads(caught_up.stdout)["replication"]
        assert {(lag["partition"], lag["lag_records"]) for lag in lags} == {(0, 0), (1, 0), (2, 0)}
        failover = shell.cli("failover", "--config", str(flow), "--group", group)
        assert failover.returncode == 0 and group in failover.stdout, failover.stdout + failover.stderr[-2000:]
        assert committed(dc2.bootstrap, group, topic, 3) == {0: 1000, 1: 1000, 2: 1000}
    finally:
        shell(commands[8], timeout=180)  # the StatefulSet, the ConfigMap and the Secret deleted
    assert wait_until(lambda: kube.kubectl("get", "pods", "-o", "name").strip() == "", 120), \
        kube.kubectl("get", "pods")
    assert shell.ran == commands[2:], "every command the README shows ran, in its order"


def test_spark_submit_sh_runs_a_flow_in_cluster_mode_as_the_deploying_guide_shows(
        kube: LocalKube, hadoop: LocalHadoop, dc1, dc2, topics, tmp_path: Path) -> None:
    """The guide's `./spark-submit.sh ... --deploy-mode cluster` line, as written: the flow file
    travels through the upload path on HDFS to a driver pod, which copies with an executor pod.
    Its destination's `${env:...}` are in the flow's Secret only, not in the submitting shell:
    the driver reads them there, and no pod's spec holds their values."""
    guide = (project_root() / "docs" / "deploying.md").read_text()
    found = re.search(r"```\n(\./spark-submit\.sh FLOW\.yaml --master k8s://.*?)```", guide, re.S)
    assert found, "docs/deploying.md: no ./spark-submit.sh line for the dev Kubernetes"
    command = found.group(1).replace("\\\n", " ").strip()
    total = 3000
    topic = _source_topic(dc1, topics, total)
    flow = _flow_file(tmp_path / "flow.yaml", hadoop, dc1, dc2, topic, "dc1-to-dc2-submit")
    settings = yaml.safe_load(flow.read_text())
    settings["destination"].update(bootstrap_servers="${env:DC2_BOOTSTRAP}", kafka={"client.id": "${env:DC2_CLIENT}"})
    flow.write_text(yaml.safe_dump(settings))
    canary = unique("canary-")
    secret = f"dr-stream-{settings['name']}"
    kube.kubectl("create", "secret", "generic", secret, f"--from-literal=DC2_BOOTSTRAP={dc2.bootstrap}",
                 f"--from-literal=DC2_CLIENT={canary}")
    rpc = unique("rpc-")  # Spark's RPC secret: in no pod spec either
    kube.kubectl("create", "secret", "generic", f"{secret}-rpc", f"--from-literal=secret={rpc}")
    line = command.replace("FLOW.yaml", str(flow)).replace("hdfs://localhost:19800", hadoop.fs_uri)
    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig), "SPARK_CONF_DIR": str(kube.spark_conf_dir)}
    for name in ("DC2_BOOTSTRAP", "DC2_CLIENT", "DR_STREAM_KUBERNETES_SECRET"):
        env.pop(name, None)
    log = tmp_path / "submit.log"
    with log.open("w") as out:
        submit = subprocess.Popen(["bash", "-c", line], env=env, cwd=project_root(), stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        assert wait_until(lambda: topic_exists(dc2.bootstrap, topic) and count(dc2.bootstrap, topic) >= total, 300), \
            log.read_text()[-3000:] + kube.kubectl("get", "pods", "-o", "wide") + \
            "".join(_driver_log(kube, pod["metadata"]["name"]) for pod in _pods(kube, "driver"))
        time.sleep(3)  # anything duplicated would land now
        assert_copied_exactly_once(dc2.bootstrap, topic, total)
        roles = {p["metadata"]["labels"].get("spark-role")
                 for p in json.loads(kube.kubectl("get", "pods", "-o", "json"))["items"]}
        assert roles == {"driver", "executor"}
        specs = kube.kubectl("get", "pods", "-o", "json")
        assert canary not in specs and f"{secret}" in specs, "a variable's value is in a pod spec"
        assert rpc not in specs, "Spark's RPC secret is in a pod spec"
        [driver] = _pods(kube, "driver")
        _rpc_secured(driver, _pods(kube, "executor"))
        assert f"the driver reads DC2_BOOTSTRAP, DC2_CLIENT from the Kubernetes Secret {secret}" in log.read_text()
    finally:
        kube.kubectl("delete", "pods", "-l", "spark-role=driver", "--wait=true", check=False)
        kube.kubectl("delete", "secret", secret, f"{secret}-rpc", "--ignore-not-found", check=False)
        try:
            submit.wait(timeout=120)  # spark-submit returns once its driver pod is gone
        except subprocess.TimeoutExpired:
            os.killpg(submit.pid, 9)
            submit.wait()
    assert wait_until(lambda: kube.kubectl("get", "pods", "-o", "name").strip() == "", 120), \
        kube.kubectl("get", "pods")
