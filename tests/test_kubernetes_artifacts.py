"""The Kubernetes artifacts agree with the pins, the package and the image `dr-stream dev k8s`
builds without Docker (`dr_stream/dev/kube_image.py`), which `make test-k8s` runs; what needs a
real cluster's operator or object store is checked here as far as it can be known without one
(docs/deploying.md: what was exercised and what was not)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from dr_stream.core.config import env_names, parse_flow
from dr_stream.dev import kube_image
from dr_stream.runtime.dist import runtime_requirements
from dr_stream.runtime.jvm import JvmPins
from dr_stream.runtime.paths import project_root
from dr_stream.runtime.state_paths import require_shared
from dr_stream.runtime.submission import IMAGE_JOB, IMAGE_PYTHON

DEPLOY = project_root() / "deploy" / "kubernetes"


def _dockerfile() -> str:
    return (DEPLOY / "Dockerfile").read_text()


def _arg(name: str) -> str:
    found = re.search(rf"^ARG {name}=(\S+)$", _dockerfile(), re.MULTILINE)
    assert found, f"Dockerfile: no ARG {name}=..."
    return found.group(1)


def _documents() -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all((DEPLOY / "spark-application.yaml").read_text())}


def _flow_text() -> str:
    return _documents()["ConfigMap"]["data"]["flow.yaml"]


def test_the_image_is_debian_with_the_packages_the_dockerless_build_installs():
    pins = JvmPins.load()
    assert _arg("SPARK_VERSION") == pins.spark
    assert _arg("SCALA_VERSION") == pins.scala
    assert _arg("HADOOP_VERSION") == pins.hadoop
    assert re.search(rf"^FROM debian:{kube_image.SUITE}-slim$", _dockerfile(), re.MULTILINE)
    installed = re.search(r"apt-get install -y --no-install-recommends ([^\\\n]+)", _dockerfile())
    assert installed and tuple(installed.group(1).split()) == kube_image.PACKAGES


def test_the_image_runs_the_driver_with_debians_python_which_the_package_accepts():
    requires = tomllib.loads((project_root() / "pyproject.toml").read_text())["project"]["requires-python"]
    minimum = tuple(int(x) for x in requires.removeprefix(">=").split("."))
    # Debian 12 (bookworm) ships Python 3.11 as python3
    assert kube_image.SUITE == "bookworm" and (3, 11) >= minimum
    venv = re.search(r"python3 -m venv (\S+)", _dockerfile()).group(1)
    assert venv == kube_image.VENV
    assert f"{venv}/bin/python" == IMAGE_PYTHON  # what spark-submit.sh gives a driver pod
    for entry in kube_image.ENV[1:]:
        assert entry in _dockerfile(), entry
    assert "pip install --no-cache-dir pyspark==${SPARK_VERSION}" in _dockerfile()


def test_the_image_lays_out_what_make_dist_writes_as_the_dockerless_build_does():
    dockerfile = _dockerfile()
    for name in ("requirements.txt", "requirements-no-deps.txt", "dr_stream-*.whl", "jars/", "replicate.py"):
        assert re.search(rf"^COPY .*\.cache/dist/{re.escape(name)}", dockerfile, re.MULTILINE), name
    assert f"COPY .cache/dist/jars/ {kube_image.SPARK_HOME}/jars/" in dockerfile
    assert f"COPY .cache/dist/replicate.py {IMAGE_JOB.removeprefix('local://')}" in dockerfile
    assert f'ln -s "$(echo {kube_image.VENV}/lib/python3*/site-packages/pyspark)" {kube_image.SPARK_HOME}' in dockerfile
    assert "COPY deploy/kubernetes/entrypoint.sh /opt/entrypoint.sh" in dockerfile
    assert 'ENTRYPOINT ["/opt/entrypoint.sh"]' in dockerfile
    assert f"useradd --uid {kube_image.SPARK_UID} " in dockerfile and f"USER {kube_image.SPARK_UID}" in dockerfile
    uid = kube_image.SPARK_UID
    assert f"mkdir -p {kube_image.WORK_DIR} && chown {uid}:{uid} {kube_image.WORK_DIR}" in dockerfile
    assert f"WORKDIR {kube_image.WORK_DIR}" in dockerfile  # where spark-submit puts --files
    normal, no_deps = runtime_requirements(project_root() / "pyproject.toml")
    assert not any(r.startswith("pyspark") for r in normal + no_deps)  # the image's pyspark is the pinned Spark


def test_the_spark_application_runs_the_images_job_for_good_at_the_pinned_spark():
    spec = _documents()["SparkApplication"]["spec"]
    assert spec["sparkVersion"] == JvmPins.load().spark
    assert spec["type"] == "Python" and spec["mode"] == "cluster"
    assert spec["mainApplicationFile"] == IMAGE_JOB
    assert spec["restartPolicy"]["type"] == "Always"


def test_the_flow_comes_from_the_config_map_where_the_driver_mounts_it():
    documents = _documents()
    spec = documents["SparkApplication"]["spec"]
    config_path = Path(spec["arguments"][spec["arguments"].index("--config") + 1])
    mounts = {m["name"]: m["mountPath"] for m in spec["driver"]["volumeMounts"]}
    volume = next(v for v in spec["volumes"] if v.get("configMap", {}).get("name") ==
                  documents["ConfigMap"]["metadata"]["name"])
    assert str(config_path.parent) == mounts[volume["name"]]
    assert config_path.name in documents["ConfigMap"]["data"]


def test_the_flow_keeps_its_state_on_object_storage_and_its_secrets_in_the_secret(monkeypatch):
    names = env_names(_flow_text())
    assert names, "the example flow names no secret"
    for name in names:
        monkeypatch.setenv(name, "x")
    flow = parse_flow(yaml.safe_load(_flow_text()), "spark-application.yaml")
    require_shared(flow)
    assert all(getattr(flow.streaming, k).startswith("s3a://") for k in ("checkpoint_dir", "offset_index",
                                                                         "translations"))
    spec = _documents()["SparkApplication"]["spec"]
    secret = spec["driver"]["envFrom"][0]["secretRef"]["name"]
    assert {e["valueFrom"]["secretKeyRef"]["name"] for e in spec["executor"]["env"]} == {secret}


def test_the_plain_spark_submit_gives_the_driver_every_variable_the_flow_names():
    script = (DEPLOY / "spark-submit-k8s.sh").read_text()
    assert '--master "k8s://' in script and "--deploy-mode cluster" in script
    assert "spark.kubernetes.file.upload.path=" in script
    for name in env_names(_flow_text()):
        assert f"spark.kubernetes.driver.secretKeyRef.{name}=" in script, name


@pytest.mark.parametrize("path", ["Dockerfile", "spark-application.yaml", "spark-submit-k8s.sh",
                                  "flow-statefulset.yaml"])
def test_no_artifact_holds_a_secret_value(path):
    text = (DEPLOY / path).read_text()
    assert not re.search(r'password="(?!\$\{env:)', text)
    assert not re.search(r"(?i)(secret_access_key|password)\s*[:=]\s*[A-Za-z0-9/+]{8,}", text)


def _statefulset_documents() -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all((DEPLOY / "flow-statefulset.yaml").read_text())}


def test_the_statefulset_runs_one_driver_pod_that_is_the_flow_s_driver():
    from dr_stream.runtime.pod_driver import POD_VARIABLES

    documents = _statefulset_documents()
    spec = documents["StatefulSet"]["spec"]
    assert spec["replicas"] == 1  # never two drivers on one checkpoint
    pod = spec["template"]["spec"]
    driver = pod["containers"][0]
    assert driver["args"][0] == "flow"  # entrypoint.sh runs dr_stream.runtime.pod_driver for it
    assert "flow)" in (DEPLOY / "entrypoint.sh").read_text()
    fields = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in driver["env"] if "valueFrom" in e}
    assert set(POD_VARIABLES) <= fields.keys()
    # executors run the driver's image
    assert f"spark.kubernetes.container.image={driver['image']}" in driver["args"]
    # the flow file is the ConfigMap's, where the pod mounts it
    flow = Path(driver["args"][1])
    mounts = {m["name"]: m["mountPath"] for m in driver["volumeMounts"]}
    volume = next(v for v in pod["volumes"] if "configMap" in v)
    assert str(flow.parent) == mounts[volume["name"]]


def test_the_statefulsets_account_may_manage_executor_pods_and_nothing_cluster_wide():
    documents = _statefulset_documents()
    account = documents["StatefulSet"]["spec"]["template"]["spec"]["serviceAccountName"]
    binding = documents["RoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                    "namespace": documents["ServiceAccount"]["metadata"]["namespace"]}]
    assert binding["roleRef"]["kind"] == "Role" and binding["roleRef"]["name"] == documents["Role"]["metadata"]["name"]
    [rule] = documents["Role"]["rules"]
    assert set(rule["resources"]) == {"pods", "configmaps"}
    # no patch or update: the driver cannot rewrite the flow's own ConfigMaps
    assert set(rule["verbs"]) == {"get", "list", "watch", "create", "delete", "deletecollection"}
    assert "ClusterRole" not in (DEPLOY / "flow-statefulset.yaml").read_text()


def test_only_the_flows_own_pods_reach_each_other_and_anyone_only_the_metrics_port():
    documents = _statefulset_documents()
    policy = documents["NetworkPolicy"]["spec"]
    labels = documents["StatefulSet"]["spec"]["template"]["metadata"]["labels"]
    executor = yaml.safe_load(documents["ConfigMap"]["data"]["executor.yaml"])
    assert policy["podSelector"]["matchLabels"] == labels == executor["metadata"]["labels"]
    assert policy["policyTypes"] == ["Ingress"]
    own, metrics = policy["ingress"]
    assert own == {"from": [{"podSelector": {"matchLabels": labels}}]}
    assert metrics == {"ports": [{"port": 9404}]}


def test_the_statefulsets_secrets_are_the_same_as_the_spark_applications():
    pod = _statefulset_documents()["StatefulSet"]["spec"]["template"]["spec"]
    secret = pod["containers"][0]["envFrom"][0]["secretRef"]["name"]
    assert secret == _documents()["SparkApplication"]["spec"]["driver"]["envFrom"][0]["secretRef"]["name"]
    for name in env_names(_flow_text()):
        assert not name.startswith("AWS_") or \
            f"spark.kubernetes.executor.secretKeyRef.{name}={secret}:{name}" in pod["containers"][0]["args"]


def test_the_driver_and_executor_pods_meet_the_restricted_pod_security_standard():
    """What the "restricted" standard asks of a pod and its containers, which a multi-tenant
    cluster's namespace usually enforces (the dev cluster cannot: its pods need the host's network)."""
    documents = _statefulset_documents()
    pod = documents["StatefulSet"]["spec"]["template"]["spec"]
    driver = pod["containers"][0]
    template_path = next(a.split("=", 1)[1] for a in driver["args"]
                         if a.startswith("spark.kubernetes.executor.podTemplateFile="))
    mounts = {m["mountPath"]: m["name"] for m in driver["volumeMounts"]}
    volume = next(v for v in pod["volumes"] if v["name"] == mounts[str(Path(template_path).parent)])
    assert volume["configMap"]["name"] == documents["ConfigMap"]["metadata"]["name"]
    executor = yaml.safe_load(documents["ConfigMap"]["data"][Path(template_path).name])["spec"]
    for spec in (pod, executor):
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] == kube_image.SPARK_UID
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert not spec.get("hostNetwork") and not any("hostPath" in v for v in spec.get("volumes", []))
        container = spec["containers"][0]["securityContext"]
        assert container["allowPrivilegeEscalation"] is False
        assert container["capabilities"] == {"drop": ["ALL"]}


def test_every_manifest_mounts_sparks_rpc_secret_where_the_driver_and_executors_read_it():
    from dr_stream.runtime.submission import RPC_SECRET_DIR, RPC_SECRET_FILE, Target, rpc_secret, rpc_security

    pod = _statefulset_documents()["StatefulSet"]["spec"]["template"]["spec"]
    driver = pod["containers"][0]
    secret = {e["name"]: e.get("value") for e in driver["env"]}["DR_STREAM_KUBERNETES_SECRET"]
    assert secret == driver["envFrom"][0]["secretRef"]["name"]
    # the StatefulSet's driver is this pod (client mode): it reads the file where the pod mounts it
    rpc = next(v["name"] for v in pod["volumes"] if v.get("secret", {}).get("secretName") == rpc_secret(secret))
    assert {m["name"]: m["mountPath"] for m in driver["volumeMounts"]}[rpc] == RPC_SECRET_DIR
    client = rpc_security(Target("k8s://https://api", "client"), [], secret, {})
    assert client["spark.authenticate.secret.driver.file"] == RPC_SECRET_FILE
    # the operator's application sets what spark-submit.sh would, with the Secret on both sides
    spec = _documents()["SparkApplication"]["spec"]
    volume = next(v["name"] for v in spec["volumes"] if v.get("secret", {}).get("secretName") == rpc_secret(secret))
    for side in ("driver", "executor"):
        assert {m["name"]: m["mountPath"] for m in spec[side]["volumeMounts"]}[volume] == RPC_SECRET_DIR
    cluster = rpc_security(Target("k8s://https://api", "cluster"), [], secret, {})
    conf = spec["sparkConf"]
    for key in ("spark.authenticate", "spark.network.crypto.enabled", "spark.authenticate.secret.file"):
        assert conf[key] == cluster[key], key
    # the driver's and the executors' own files default to spark.authenticate.secret.file
    assert cluster["spark.authenticate.secret.driver.file"] == cluster["spark.authenticate.secret.executor.file"] \
        == conf["spark.authenticate.secret.file"]
    assert conf["spark.executorEnv.SPARK_JAVA_OPT_1000"].startswith("-Dspark.master=k8s://")
