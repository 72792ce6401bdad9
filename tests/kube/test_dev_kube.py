"""The dev Kubernetes on this machine, end to end: `make test-k8s` runs these (not `make test`).

The first run builds Kubernetes from the Go module proxy (20-30 minutes on 2 cores); later runs
find the binaries cached and start the cluster in about a minute.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from dr_stream.dev.kube import LocalKube
from dr_stream.dev.kube_commands import kube_command
from dr_stream.dev.kube_configs import IMAGE, NODE
from dr_stream.dev.kube_image import SPARK_UID
from dr_stream.dev.kube_network import NODE_IP
from dr_stream.runtime.jvm import JvmPins

pytestmark = [pytest.mark.integration, pytest.mark.kube]


def _pod(name: str, host_network: bool) -> str:
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"hostNetwork": host_network, "terminationGracePeriodSeconds": 2,
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "imagePullPolicy": "Never"}]},
    })


def _wait_running(kube: LocalKube, name: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        pod = json.loads(kube.kubectl("get", "pod", name, "-o", "json"))
        if pod["status"].get("phase") == "Running":
            return pod
        if time.monotonic() > deadline:
            raise AssertionError(f"pod {name} not running after {timeout}s: {json.dumps(pod['status'])[:2000]}")
        time.sleep(1)


def test_the_node_is_ready_and_status_names_the_kubeconfig(kube: LocalKube, capsys: pytest.CaptureFixture[str]) -> None:
    assert kube.node_ready()
    nodes = json.loads(kube.kubectl("get", "nodes", "-o", "json"))["items"]
    assert [n["metadata"]["name"] for n in nodes] == [NODE]
    addresses = {a["type"]: a["address"] for a in nodes[0]["status"]["addresses"]}
    assert addresses["InternalIP"] == NODE_IP
    assert kube_command("status", kube) == 0
    assert f"export KUBECONFIG={kube.kubeconfig}" in capsys.readouterr().out


def test_a_pod_gets_an_address_on_the_bridge_inside_the_clusters_namespace(kube: LocalKube) -> None:
    kube.kubectl("apply", "-f", "-", stdin=_pod("on-bridge", host_network=False))
    pod = _wait_running(kube, "on-bridge")
    assert pod["status"]["podIP"].startswith("10.244.0.")
    kube.kubectl("delete", "pod", "on-bridge", "--wait=true")


def test_a_pod_on_the_nodes_network_runs_too(kube: LocalKube) -> None:
    kube.kubectl("apply", "-f", "-", stdin=_pod("on-host", host_network=True))
    pod = _wait_running(kube, "on-host")
    assert pod["status"]["podIP"] == NODE_IP


def test_dr_streams_image_runs_java_spark_and_the_package_as_spark_s_user(kube: LocalKube) -> None:
    script = ("id -u; java -version 2>&1 | head -1; "
              "$PYSPARK_PYTHON -c 'import dr_stream.cli, delta, pyspark; print(\"pyspark\", pyspark.__version__)'; "
              "$SPARK_HOME/bin/spark-submit --version 2>&1 | grep -o 'version [0-9.]*' | head -1; "
              "ls $SPARK_HOME/jars | grep -c '^dr-stream'")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "image-probe"},
           "spec": {"hostNetwork": True, "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                                    "args": ["bash", "-c", script]}]}}
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    deadline = time.monotonic() + 120
    while (phase := kube.kubectl("get", "pod", "image-probe", "-o", "jsonpath={.status.phase}")) not in (
            "Succeeded", "Failed"):
        assert time.monotonic() < deadline, f"image-probe still {phase}"
        time.sleep(1)
    lines = kube.kubectl("logs", "image-probe").splitlines()
    assert phase == "Succeeded", lines
    pins = JvmPins.load()
    assert lines[0] == str(SPARK_UID)
    assert lines[1].startswith('openjdk version "17.')
    assert lines[2] == f"pyspark {pins.spark}"
    assert lines[3] == f"version {pins.spark}"
    assert int(lines[4]) >= 1  # dr-stream's jar on Spark's classpath


def test_a_spark_application_runs_in_a_driver_pod_with_executor_pods(kube: LocalKube) -> None:
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig), "SPARK_CONF_DIR": str(kube.spark_conf_dir),
           "SPARK_HOME": str(spark_home)}
    done = subprocess.run(
        [str(spark_home / "bin" / "spark-submit"), "--master", f"k8s://{kube.server}", "--deploy-mode", "cluster",
         "--name", "pi", "--conf", "spark.executor.instances=2",
         "local:///opt/spark/examples/src/main/python/pi.py", "20"],
        env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "phase: Succeeded" in done.stderr
    driver = next(name for name in kube.kubectl("get", "pods", "-o", "name").split() if name.endswith("-driver"))
    log = kube.kubectl("logs", driver)
    assert "Pi is roughly 3.1" in log
    # both executors registered with the driver, found by its Service's name through the cluster's DNS
    assert log.count("Registered executor NettyRpcEndpointRef") == 2, log[-3000:]
    kube.kubectl("delete", "pods", "--all", "--wait=true")


def test_up_again_leaves_what_runs(kube: LocalKube) -> None:
    before = kube.pids()
    began = time.monotonic()
    kube.up(say=lambda _: None)
    assert kube.pids() == before
    assert time.monotonic() - began < 30


def test_down_stops_every_process_and_container(tmp_path_factory: pytest.TempPathFactory, kube: LocalKube) -> None:
    pids = [pid for pid in kube.pids().values() if pid]
    assert kube.down(say=lambda _: None) == len(kube.COMPONENTS)
    assert not any(kube.pids().values())
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    # no shim or container process of this cluster outlives it
    home = str(kube.home)
    left = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if home in cmdline and int(entry.name) != os.getpid():
                left.append(cmdline)
    assert left == []
    assert kube.mounts() == []
    assert not kube.namespace.exists()  # and the bridge and the node's address with it
    assert not Path("/sys/class/net/drkube0").exists()
