"""A pod that is its flow's driver: the options it submits with, from what its manifest gives it."""

from __future__ import annotations

import pytest

from dr_stream.runtime.pod_driver import NotInAPod, api_server, pod_options
from dr_stream.runtime.submission import IMAGE_JOB_PATH, Artifacts, Target, plan

POD = {"POD_NAME": "dr-stream-dc1-to-dc2-0", "POD_NAMESPACE": "dr-stream", "POD_IP": "10.1.2.3",
       "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


def _conf(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--conf")


def test_the_pod_is_a_client_mode_driver_its_executors_connect_back_to_and_are_named_after():
    options = pod_options(POD)
    assert Target.of(options) == Target("k8s://https://10.96.0.1:443", "client")
    conf = _conf(options)
    assert conf["spark.driver.host"] == "10.1.2.3"
    assert conf["spark.kubernetes.driver.pod.name"] == "dr-stream-dc1-to-dc2-0"  # executors owned by the pod
    assert conf["spark.kubernetes.namespace"] == "dr-stream"
    assert conf["spark.kubernetes.executor.podNamePrefix"] == "dr-stream-dc1-to-dc2-0"


def test_the_api_server_is_the_clusters_own_unless_another_is_named():
    assert api_server(POD) == "https://10.96.0.1:443"
    assert api_server({**POD, "KUBERNETES_SERVICE_HOST": "fd00::1"}) == "https://[fd00::1]:443"
    assert api_server({**POD, "DR_STREAM_KUBERNETES_API": "https://10.244.0.1:16443"}) == "https://10.244.0.1:16443"


@pytest.mark.parametrize("missing", ["POD_NAME", "POD_NAMESPACE", "POD_IP", "KUBERNETES_SERVICE_HOST"])
def test_outside_a_pod_one_line_names_what_is_missing(missing):
    with pytest.raises(NotInAPod, match=missing):
        pod_options({k: v for k, v in POD.items() if k != missing})


def test_inside_the_image_nothing_is_shipped_and_the_images_job_runs_the_mounted_flow():
    argv = plan(pod_options(POD), "/etc/dr-stream/flow/flow.yaml", "f", Artifacts((), "", IMAGE_JOB_PATH),
                "(?i)secret", None, "dr-stream-f", {})
    assert "--jars" not in argv and "--files" not in argv and "--archives" not in argv
    assert argv[-3:] == [IMAGE_JOB_PATH, "--config", "/etc/dr-stream/flow/flow.yaml"]


def test_a_pod_name_too_long_for_spark_leaves_the_executors_named_after_the_application():
    conf = _conf(pod_options({**POD, "POD_NAME": "f" * 46 + "-0"}))
    assert "spark.kubernetes.executor.podNamePrefix" not in conf
    assert conf["spark.kubernetes.driver.pod.name"] == "f" * 46 + "-0"
