"""The Kubernetes artifacts agree with the pins and the package. No Kubernetes runs here: these
checks are what can be known without one (docs/deploying.md: what was exercised and what was not)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from dr_stream.core.config import env_names, parse_flow
from dr_stream.runtime.dist import runtime_requirements
from dr_stream.runtime.jvm import JvmPins
from dr_stream.runtime.paths import project_root
from dr_stream.runtime.state_paths import require_shared
from dr_stream.runtime.submission import IMAGE_JOB

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


def test_the_image_is_apache_spark_at_the_pinned_spark_scala_and_hadoop_versions():
    pins = JvmPins.load()
    assert _arg("SPARK_VERSION") == pins.spark
    assert _arg("SCALA_VERSION") == pins.scala
    assert _arg("HADOOP_VERSION") == pins.hadoop
    assert re.search(r"^FROM apache/spark:\$\{SPARK_VERSION\}-scala\$\{SCALA_VERSION\}-java17-python3-ubuntu$",
                     _dockerfile(), re.MULTILINE)


def test_the_image_installs_a_python_the_package_accepts_and_runs_the_driver_with_it():
    requires = tomllib.loads((project_root() / "pyproject.toml").read_text())["project"]["requires-python"]
    minimum = tuple(int(x) for x in requires.removeprefix(">=").split("."))
    installed = re.search(r"apt-get install .*?python3\.(\d+) ", _dockerfile(), re.DOTALL)
    assert installed and (3, int(installed.group(1))) >= minimum
    venv = re.search(r"python3\.\d+ -m venv (\S+)", _dockerfile()).group(1)
    assert f"PYSPARK_PYTHON={venv}/bin/python" in _dockerfile()
    assert f"PYSPARK_DRIVER_PYTHON={venv}/bin/python" in _dockerfile()


def test_the_image_copies_what_make_dist_writes_to_where_the_job_and_spark_expect_it():
    dockerfile = _dockerfile()
    for name in ("requirements.txt", "requirements-no-deps.txt", "dr_stream-*.whl", "jars/", "replicate.py"):
        assert re.search(rf"^COPY .*{re.escape(name)}", dockerfile, re.MULTILINE), name
    assert "COPY jars/ /opt/spark/jars/" in dockerfile
    assert f"COPY replicate.py {IMAGE_JOB.removeprefix('local://')}" in dockerfile
    normal, no_deps = runtime_requirements(project_root() / "pyproject.toml")
    assert not any(r.startswith("pyspark") for r in normal + no_deps)  # the image's own pyspark runs


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


@pytest.mark.parametrize("path", ["Dockerfile", "spark-application.yaml", "spark-submit-k8s.sh"])
def test_no_artifact_holds_a_secret_value(path):
    text = (DEPLOY / path).read_text()
    assert not re.search(r'password="(?!\$\{env:)', text)
    assert not re.search(r"(?i)(secret_access_key|password)\s*[:=]\s*[A-Za-z0-9/+]{8,}", text)
