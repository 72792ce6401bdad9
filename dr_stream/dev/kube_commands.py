"""`dr-stream dev k8s up | down | status`: the local Kubernetes, for people (presentation only)."""

from __future__ import annotations

import time

from dr_stream.dev.kube import LocalKube, dev_kube
from dr_stream.dev.kube_configs import NODE


def _print_status(kube: LocalKube) -> None:
    print(f"kubernetes\t{kube.server}\tnode {NODE} {'Ready' if kube.node_ready() else 'not ready'}")
    for name, pid in kube.pids().items():
        print(f"  {name}\t{'running (pid ' + str(pid) + ')' if pid else 'stopped'}")
    print(f"export KUBECONFIG={kube.kubeconfig}")
    print(f"export SPARK_CONF_DIR={kube.spark_conf_dir}   # spark-submit --master k8s://{kube.server}")
    print(f"export PATH={kube.kubectl_dir}:$PATH   # kubectl")
    print(f"flow StatefulSet for this cluster: {kube.flow_manifest}")


def kube_command(action: str, kube: LocalKube | None = None) -> int:
    kube = kube or dev_kube()
    if action == "up":
        began = time.monotonic()
        print(f"kube: starting a single-node Kubernetes under {kube.home} ...", flush=True)
        kube.up(say=lambda line: print(line, flush=True))
        print(f"kube: ready in {time.monotonic() - began:.1f}s")
        _print_status(kube)
    elif action == "down":
        stopped = kube.down(say=lambda line: print(line, flush=True))
        print(f"kube: {'stopped ' + str(stopped) + ' processes' if stopped else 'was not running'}")
    else:
        if not kube.is_running():
            print("kube: stopped" if not any(kube.pids().values()) else "kube: partly running")
            for name, pid in kube.pids().items():
                print(f"  {name}\t{'running (pid ' + str(pid) + ')' if pid else 'stopped'}")
            return 1
        _print_status(kube)
    return 0
