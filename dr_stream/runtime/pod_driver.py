"""A flow whose driver is the pod it runs in (deploy/kubernetes/flow-statefulset.yaml).

The image's entry point runs `python -m dr_stream.runtime.pod_driver FLOW.yaml [spark-submit
options]` for its `flow` argument. The flow is submitted as `spark-submit.sh` submits it, in
client mode, from inside the image (its Spark, its job file, its jars), with this pod as the
driver:

* the API server is the cluster's own (`KUBERNETES_SERVICE_HOST`), unless
  `DR_STREAM_KUBERNETES_API` names another address (a cluster without kube-proxy);
* the pod's account signs the driver's calls: Spark's Kubernetes client reads its token and CA
  where Kubernetes mounts them;
* executors connect back to the pod's IP, and are named after it and owned by it, so a deleted
  driver pod takes its executors along instead of leaving them to a driver that is gone.

Whoever restarts the pod (the StatefulSet) restarts the flow; it resumes from its checkpoint.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

# What the pod learns of itself through the downward API (the manifest sets these).
POD_VARIABLES = ("POD_NAME", "POD_NAMESPACE", "POD_IP")
# Spark refuses a longer executor pod name prefix (the rest of a pod's name is `-exec-<id>`).
MAX_EXECUTOR_PREFIX = 47


class NotInAPod(ValueError):
    """The environment lacks what a pod's manifest gives its driver."""


def api_server(environ: Mapping[str, str]) -> str:
    """The API server's URL as seen from inside the pod."""
    given = environ.get("DR_STREAM_KUBERNETES_API")
    if given:
        return given
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise NotInAPod("KUBERNETES_SERVICE_HOST is not set: this does not run in a Kubernetes pod "
                        "(or set DR_STREAM_KUBERNETES_API to the API server's URL)")
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def pod_options(environ: Mapping[str, str]) -> list[str]:
    """spark-submit's options that make this pod the driver of a client-mode application."""
    missing = [name for name in POD_VARIABLES if not environ.get(name)]
    if missing:
        raise NotInAPod(f"{', '.join(missing)} not set: the pod's manifest gives them from the downward API "
                        "(deploy/kubernetes/flow-statefulset.yaml)")
    settings = {
        "spark.driver.host": environ["POD_IP"],
        "spark.kubernetes.driver.pod.name": environ["POD_NAME"],
        "spark.kubernetes.namespace": environ["POD_NAMESPACE"],
    }
    if len(environ["POD_NAME"]) <= MAX_EXECUTOR_PREFIX:  # else Spark names them after the application
        settings["spark.kubernetes.executor.podNamePrefix"] = environ["POD_NAME"]
    options = ["--master", f"k8s://{api_server(environ)}", "--deploy-mode", "client"]
    for key, value in settings.items():
        options += ["--conf", f"{key}={value}"]
    return options


def main(argv: list[str]) -> int:
    from dr_stream.exit_codes import ExitCode
    from dr_stream.runtime import submission

    if not argv:
        print("usage: pod_driver FLOW.yaml [spark-submit options]", file=sys.stderr)
        return ExitCode.USAGE
    try:
        ours = pod_options(os.environ)
    except NotInAPod as exc:
        print(f"pod_driver: {exc}", file=sys.stderr)
        return ExitCode.CONFIG
    # The manifest's options come last: a `--conf` there overrides one of ours.
    return submission.main([argv[0], *ours, *argv[1:]], in_image=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
