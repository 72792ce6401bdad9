"""The Helm chart (deploy/helm/dr-stream) with a real helm, built from the Go module proxy: its
default values render the shipped manifests object for object, its dev values what `dev k8s up`
applies, and on the dev Kubernetes an install runs a flow that an upgrade (a changed value rolls
the driver) and an uninstall keep exactly once. `make test-k8s` runs it."""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from dr_stream.dev.hadoop import LocalHadoop
from dr_stream.dev.helm import HELM_VERSION, build_helm
from dr_stream.dev.kube import SHIPPED_FLOW_MANIFEST, SHIPPED_HELM_VALUES, LocalKube
from dr_stream.dev.kube_configs import dev_flow_manifest, dev_helm_values
from dr_stream.runtime.paths import project_root
from tests.kafka_tools import assert_copied_exactly_once, count, topic_exists, wait_until
from tests.kube.test_flow_in_pods import _driver_log, _flow_file, _pod, _source_topic

pytestmark = [pytest.mark.integration, pytest.mark.kube]
CHART = project_root() / "deploy" / "helm" / "dr-stream"
RELEASE = "dr-stream-dc1-to-dc2"
DRIVER = f"{RELEASE}-0"


@pytest.fixture(scope="module")
def helm() -> Path:
    return build_helm()


def run_helm(helm: Path, *args: str, kube: LocalKube | None = None, timeout: float = 300) -> str:
    where = [f"--kubeconfig={kube.kubeconfig}", "--namespace=default"] if kube else []
    done = subprocess.run([str(helm), *args, *where], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"helm {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done.stdout


def comparable(documents: list[dict[str, Any]]) -> dict[tuple[str, str], Any]:
    """Objects by (kind, name), with what is the same object written another way made one: the
    executors' pod template parsed, and spark-submit's `--conf` options in key order (their order
    means nothing to spark-submit)."""
    out = {}
    for doc in (json.loads(json.dumps(d)) for d in documents if d):
        if doc["kind"] == "ConfigMap":
            doc["data"] = {k: yaml.safe_load(v) for k, v in doc["data"].items()}
        if doc["kind"] == "StatefulSet":
            driver = doc["spec"]["template"]["spec"]["containers"][0]
            args = driver["args"]
            driver["args"] = args[:2] + sorted(zip(args[2::2], args[3::2], strict=True))
        out[(doc["kind"], doc["metadata"]["name"])] = doc
    return out


def rendered(helm: Path, *options: str) -> dict[tuple[str, str], Any]:
    return comparable(list(yaml.safe_load_all(run_helm(helm, "template", RELEASE, str(CHART), *options))))


def test_helm_is_the_pinned_release_and_the_chart_lints_clean(helm):
    assert HELM_VERSION in run_helm(helm, "version", "--short")
    said = run_helm(helm, "lint", str(CHART), "--strict")
    assert "0 chart(s) failed" in said, said


def test_the_charts_defaults_render_the_shipped_manifests_object_for_object(helm):
    shipped = comparable(list(yaml.safe_load_all((project_root() / SHIPPED_FLOW_MANIFEST).read_text())))
    assert rendered(helm, "--namespace", "dr-stream") == shipped


def test_the_charts_dev_values_render_what_dev_k8s_up_applies(helm, tmp_path):
    server = "https://127.0.0.1:16443"
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(dev_helm_values(yaml.safe_load((project_root() / SHIPPED_HELM_VALUES)
                                                                    .read_text()), server)))
    shipped = list(yaml.safe_load_all((project_root() / SHIPPED_FLOW_MANIFEST).read_text()))
    dev = comparable(dev_flow_manifest(shipped, server))
    ours = rendered(helm, "--namespace", "default", "-f", str(values))
    # the dev manifest is applied to the kubeconfig's namespace: it names none
    for doc in ours.values():
        doc["metadata"].pop("namespace", None)
    assert ours == dev


def test_a_service_monitor_is_rendered_only_when_asked_for_and_scrapes_the_metrics_port(helm):
    assert not any(kind == "ServiceMonitor" for kind, _ in rendered(helm))
    monitor = rendered(helm, "--set", "metrics.serviceMonitor.enabled=true")[("ServiceMonitor", RELEASE)]
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s"}]
    assert monitor["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "dr-stream",
                                                          "dr-stream/flow": "dc1-to-dc2"}


def test_no_secret_value_is_in_what_the_chart_renders(helm):
    kinds = {kind for kind, _ in rendered(helm)}
    assert "Secret" not in kinds, "the chart takes Secrets by reference only"


def test_a_flow_installed_with_helm_survives_an_upgrade_and_is_uninstalled_exactly_once(
        helm, kube: LocalKube, hadoop: LocalHadoop, dc1, dc2, topics, tmp_path: Path) -> None:
    total = 60_000
    topic = _source_topic(dc1, topics, total)
    flow = _flow_file(tmp_path / "flow.yaml", hadoop, dc1, dc2, topic, "dc1-to-dc2-helm")
    kube.kubectl("create", "secret", "generic", f"{RELEASE}-rpc", f"--from-literal=secret={secrets.token_hex(32)}")
    kube.kubectl("create", "configmap", "dr-stream-flow", f"--from-file=flow.yaml={flow}")
    values = str(kube.helm_values)
    try:
        run_helm(helm, "install", RELEASE, str(CHART), "-f", values, kube=kube)
        kube.kubectl("rollout", "status", f"statefulset/{RELEASE}", "--timeout=5m")
        first = _pod(kube, DRIVER)
        assert first is not None
        assert wait_until(lambda: topic_exists(dc2.bootstrap, topic) and count(dc2.bootstrap, topic) >= 6000, 300), \
            _driver_log(kube)

        # a changed value: the StatefulSet's pod template changes, so its driver is replaced
        run_helm(helm, "upgrade", RELEASE, str(CHART), "-f", values, "--set", "podAnnotations.change-id=2", kube=kube)
        at_upgrade = count(dc2.bootstrap, topic)
        assert at_upgrade < total, "the copy finished before the upgrade; the test proves nothing"

        def replaced() -> bool:
            pod = _pod(kube, DRIVER)
            return (pod is not None and pod["metadata"]["uid"] != first["metadata"]["uid"]
                    and pod["status"].get("phase") == "Running"
                    and pod["metadata"].get("annotations", {}).get("change-id") == "2")

        assert wait_until(replaced, 180, interval=1), kube.kubectl("get", "pods", "-o", "wide")
        assert wait_until(lambda: count(dc2.bootstrap, topic) >= total, 300), _driver_log(kube)
        time.sleep(3)  # anything duplicated would land now
        assert_copied_exactly_once(dc2.bootstrap, topic, total)
        history = json.loads(run_helm(helm, "history", RELEASE, "-o", "json", kube=kube))
        assert [h["revision"] for h in history] == [1, 2] and history[-1]["status"] == "deployed", history
    finally:
        run_helm(helm, "uninstall", RELEASE, "--wait", "--timeout=3m", kube=kube)
        kube.kubectl("delete", "configmap/dr-stream-flow", f"secret/{RELEASE}-rpc", "--ignore-not-found")
    assert wait_until(lambda: kube.kubectl("get", "pods", "-o", "name").strip() == "", 180), kube.kubectl("get", "pods")
    # every object the chart made went with it
    for kind, name in rendered(helm, "-f", values):
        assert kube.kubectl("get", kind.lower(), name, "--ignore-not-found", "-o", "name").strip() == "", (kind, name)
    assert_copied_exactly_once(dc2.bootstrap, topic, total)


def test_a_pod_annotation_given_as_a_number_is_rendered_as_the_string_kubernetes_takes(helm):
    template = rendered(helm, "--set", "podAnnotations.change-id=2")[("StatefulSet", RELEASE)]["spec"]["template"]
    assert template["metadata"]["annotations"]["change-id"] == "2"
