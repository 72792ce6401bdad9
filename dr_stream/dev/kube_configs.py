"""The files the dev Kubernetes' processes read, and what Spark needs to submit to it: pure
functions of the cluster's paths and ports (`kube.LocalKube` writes them at `up`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dr_stream.dev.kube_network import CLUSTER_DOMAIN, NODE_IP
from dr_stream.runtime.submission import rpc_secret

CNI_BIN = Path("/usr/lib/cni")
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
IMAGE = "dr-stream.dev/dr-stream:dev"  # dr-stream's driver and executor image (`kube_image`)
CLIENT = "extendedKeyUsage=clientAuth\n"
_SERVER_NAMES = (f"IP:{NODE_IP},IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
                 "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local")
NODE = "drs-node"
# (file name, subject, extensions) of each certificate the dev CA signs
CERTIFICATES = (
    ("apiserver", "/CN=kube-apiserver", f"subjectAltName={_SERVER_NAMES}\nextendedKeyUsage=serverAuth\n"),
    ("apiserver-kubelet", "/O=system:masters/CN=kube-apiserver-kubelet-client", CLIENT),
    ("admin", "/O=system:masters/CN=dr-stream-admin", CLIENT),
    ("kubelet", f"/O=system:nodes/CN=system:node:{NODE}", CLIENT),
)
# what etcd's own CA signs: etcd's server certificate and the one client it has, the API server
ETCD_CERTIFICATES = (
    ("server", "/CN=etcd", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
    ("apiserver-client", "/CN=kube-apiserver-etcd-client", CLIENT),
)
# Fixed ports a Spark pod on the node's network binds inside the namespace (the driver's block
# manager): the relay never takes them for a port of this machine.
RESERVED_INSIDE = (7079,)

# The account Spark's driver runs as: it creates and deletes its executor pods and their Service.
SPARK_ACCOUNT = json.dumps({"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "spark", "namespace": "default"}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
     "metadata": {"name": "spark-edit", "namespace": "default"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
     "subjects": [{"kind": "ServiceAccount", "name": "spark", "namespace": "default"}]},
]})

def containerd_config(home: Path, socket: Path) -> str:
    """containerd's own root, state and socket under `home`, the CRI plugin on runc with cgroupfs,
    the CNI bridge above. `restrict_oom_score_adj`: root here may not lower a score (no
    CAP_SYS_RESOURCE)."""
    return f"""version = 2
root = "{home / 'containerd' / 'root'}"
state = "{home / 'containerd' / 'state'}"

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{home / 'cni'}"
"""


def kubelet_config(port: int, pki: Path, runtime_socket: Path, home: Path) -> dict[str, Any]:
    """The kubelet on the bridge's address with cgroupfs (cgroup v1 allowed), client certificates from the
    dev CA, and eviction thresholds low enough for a shared disk."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": NODE_IP, "port": port, "healthzBindAddress": "127.0.0.1",
        "healthzPort": port - 2, "readOnlyPort": 0,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(pki / "ca.pem")}},
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs", "failCgroupV1": False, "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{runtime_socket}",
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 99, "imageGCLowThresholdPercent": 98,
        "localStorageCapacityIsolation": False, "resolvConf": "/etc/resolv.conf",
        "clusterDNS": [NODE_IP], "clusterDomain": CLUSTER_DOMAIN,
        "serializeImagePulls": False, "maxPods": 30, "podLogsDir": str(home / "pod-logs"),
    }


# Spark's driver and executors share the node's network: the relay brings the dev Kafka clusters
# and HDFS to its 127.0.0.1, at the addresses they advertise, which a pod on the bridge has not.
POD_TEMPLATE = {"apiVersion": "v1", "kind": "Pod",
                "spec": {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"}}


# What every Spark pod of this cluster needs, wherever the application was submitted from: the
# imported image, never pulled; each executor's block manager on a free port instead of Spark's
# fixed 7079 (pods on the node's network would both claim it); half a core asked, so a driver and
# two executors fit on 2 cores.
POD_SETTINGS = {
    "spark.kubernetes.container.image": IMAGE,
    "spark.kubernetes.container.image.pullPolicy": "Never",
    "spark.blockManager.port": "0",
    "spark.kubernetes.executor.request.cores": "0.5",
}


def spark_settings(server: str, pod_template: Path) -> dict[str, str]:
    """What spark-submit needs for this cluster beyond `--master k8s://<server>`: `POD_SETTINGS`;
    the driver's account; the API server at `server`, which a pod on the node's network reaches
    too (there is no kube-proxy behind `kubernetes.default`); pods on the node's network; the
    driver's block manager on Spark's 7079 and half a core for it too."""
    return {
        **POD_SETTINGS,
        "spark.kubernetes.namespace": "default",
        "spark.kubernetes.authenticate.driver.serviceAccountName": "spark",
        "spark.kubernetes.driver.master": server,
        "spark.kubernetes.driver.podTemplateFile": str(pod_template),
        "spark.kubernetes.executor.podTemplateFile": str(pod_template),
        "spark.driver.blockManager.port": "7079",
        "spark.kubernetes.driver.request.cores": "0.5",
    }


# Options of the shipped StatefulSet's driver that name what only a real cluster has: the
# Secrets with the object store's keys and the Kafka truststore.
_CLUSTER_ONLY = ("secretKeyRef.", ".secrets.", "fs.s3a.")


def dev_flow_manifest(shipped: list[dict[str, Any]], server: str) -> list[dict[str, Any]]:
    """The shipped flow StatefulSet (deploy/kubernetes/flow-statefulset.yaml) as it runs on this
    cluster, every other line as shipped: in the kubeconfig's namespace; the imported image, never
    pulled; the API server at `server` (no kube-proxy); the driver and its executors on
    the node's network (`POD_TEMPLATE`), one executor with a free block-manager port; half a core
    asked; none of the Secrets a real cluster holds (the dev clusters need no password, the dev
    HDFS no key) but Spark's RPC secret, which the driver and its executors share here too."""
    import yaml

    documents: list[dict[str, Any]] = json.loads(json.dumps(shipped))
    on_host = POD_TEMPLATE["spec"]
    for document in documents:
        document["metadata"].pop("namespace", None)
        for subject in document.get("subjects", []):
            subject["namespace"] = "default"
        if document["kind"] == "ConfigMap":  # the executors' pod template
            for name, text in document["data"].items():
                template = yaml.safe_load(text)
                template["spec"].update(on_host)
                document["data"][name] = yaml.safe_dump(template, sort_keys=False)
    for statefulset in (d for d in documents if d["kind"] == "StatefulSet"):
        pod = statefulset["spec"]["template"]["spec"]
        pod.update(on_host)
        driver = pod["containers"][0]
        flow_secret = {e["name"]: e.get("value") for e in driver["env"]}["DR_STREAM_KUBERNETES_SECRET"]
        secret_volumes = {v["name"] for v in pod["volumes"]
                          if "secret" in v and v["secret"]["secretName"] != rpc_secret(flow_secret)}
        pod["volumes"] = [v for v in pod["volumes"] if v["name"] not in secret_volumes]
        driver.update(image=IMAGE, imagePullPolicy="Never")
        driver.pop("envFrom", None)
        driver["env"].append({"name": "DR_STREAM_KUBERNETES_API", "value": server})
        driver["resources"] = {"requests": {"cpu": "500m", "memory": "3Gi"}, "limits": {"memory": "3Gi"}}
        driver["volumeMounts"] = [m for m in driver["volumeMounts"] if m["name"] not in secret_volumes]
        dev = {**POD_SETTINGS, "spark.executor.instances": "1"}
        args = driver["args"]
        kept = args[:2]  # `flow FLOW.yaml`
        for option, value in zip(args[2::2], args[3::2], strict=True):
            if value.split("=", 1)[0] not in dev and not any(mark in value for mark in _CLUSTER_ONLY):
                kept += [option, value]
        driver["args"] = kept + [x for key, value in dev.items() for x in ("--conf", f"{key}={value}")]
    return documents


def dev_helm_values(shipped: dict[str, Any], server: str) -> dict[str, Any]:
    """The Helm chart's values (deploy/helm/dr-stream/values.yaml) as they run on this cluster: the
    same changes `dev_flow_manifest` makes to the shipped StatefulSet, so the chart installed with
    them renders what that applies (a test keeps the two equal)."""
    repository, tag = IMAGE.rsplit(":", 1)
    dev = {**POD_SETTINGS, "spark.executor.instances": "1"}
    dev.pop("spark.kubernetes.container.image")  # the chart's `image`
    # Helm merges these over the chart's defaults: a default this cluster has no use for is
    # removed by giving it null.
    conf = {key: None if any(mark in f"{key}={value}" for mark in _CLUSTER_ONLY) else value
            for key, value in shipped["sparkConf"].items() if key not in dev}
    return {
        **shipped,
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "secrets": {**shipped["secrets"], "env": "", "tls": ""},
        "sparkConf": {**conf, **dev},
        "driver": {**shipped["driver"], "extraEnv": [{"name": "DR_STREAM_KUBERNETES_API", "value": server}],
                   "resources": {"requests": {"cpu": "500m", "memory": "3Gi"}, "limits": {"memory": "3Gi"}}},
        "podSpec": POD_TEMPLATE["spec"],
    }
