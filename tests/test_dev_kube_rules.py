"""The dev Kubernetes' pure parts: the build module, the image archive, the configs it writes."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from dr_stream.dev import oci_image
from dr_stream.dev.kube import LocalKube
from dr_stream.dev.kube_build import build_go_mod, staging_modules, staging_version, tools_go
from dr_stream.dev.kube_configs import containerd_config, kubelet_config, spark_settings
from dr_stream.dev.kube_network import BRIDGE, NAMESPACE, NODE_IP, cni_config
from dr_stream.dev.kube_relay import loopback_listeners

KUBERNETES_GO_MOD = """module k8s.io/kubernetes

go 1.24.0

require (
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tgithub.com/other/mod => github.com/other/mod v1.2.3
)
"""


def test_staging_modules_are_published_as_v0_of_the_kubernetes_minor() -> None:
    assert staging_version("v1.34.4") == "v0.34.4"
    with pytest.raises(ValueError):
        staging_version("v2.0.0")


def test_the_build_module_maps_each_staging_module_and_nothing_else() -> None:
    assert staging_modules(KUBERNETES_GO_MOD) == ["k8s.io/api", "k8s.io/client-go"]
    go_mod = build_go_mod(KUBERNETES_GO_MOD, "v1.34.4")
    assert "require k8s.io/kubernetes v1.34.4" in go_mod
    assert "\tk8s.io/api => k8s.io/api v0.34.4" in go_mod
    assert "\tk8s.io/client-go => k8s.io/client-go v0.34.4" in go_mod
    assert "github.com/other" not in go_mod
    assert "\ngo 1.24.0\n" in go_mod
    assert '_ "k8s.io/kubernetes/cmd/kubelet"' in tools_go()


def _archive_members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_an_image_archive_is_the_same_bytes_every_time_and_names_its_image(tmp_path: Path) -> None:
    layer = oci_image.layer_from_tar(oci_image.layer_tar([oci_image.FileEntry("usr/bin/tool", b"#!/bin/sh\n", 0o755)]),
                                     tmp_path / "layer.tar.gz")
    config = oci_image.ImageConfig(entrypoint=["/usr/bin/tool"])
    first = oci_image.write_archive(tmp_path / "a.tar", "example.invalid/tool:1", [layer], config)
    second = oci_image.write_archive(tmp_path / "b.tar", "example.invalid/tool:1", [layer], config)
    assert first == second
    members = _archive_members(tmp_path / "a.tar")
    index = json.loads(members["index.json"])
    assert index["manifests"][0]["annotations"]["io.containerd.image.name"] == "example.invalid/tool:1"
    manifest = json.loads(members["blobs/sha256/" + first.removeprefix("sha256:")])
    gz = members["blobs/sha256/" + manifest["layers"][0]["digest"].removeprefix("sha256:")]
    cfg = json.loads(members["blobs/sha256/" + manifest["config"]["digest"].removeprefix("sha256:")])
    # the diff id is the digest of the uncompressed layer, the layer's digest that of the gzip
    assert cfg["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(gzip.decompress(gz)).hexdigest()]
    assert cfg["config"]["Entrypoint"] == ["/usr/bin/tool"]
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(gz))) as tar:
        names = {m.name: m for m in tar.getmembers()}
    assert names["usr"].isdir() and names["usr/bin"].isdir()
    assert names["usr/bin/tool"].mode == 0o755 and names["usr/bin/tool"].uid == 0


def test_a_directory_layer_streams_to_the_same_digests_every_time(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "opt" / "app").mkdir(parents=True)
    (root / "opt" / "app" / "run").write_bytes(b"x" * 100_000)
    (root / "opt" / "app" / "run").chmod(0o755)
    (root / "bin").symlink_to("opt/app")
    first = oci_image.layer_from_directory(root, tmp_path / "one.tar.gz")
    second = oci_image.layer_from_directory(root, tmp_path / "two.tar.gz")
    assert (first.digest, first.diff_id, first.size) == (second.digest, second.diff_id, second.size)
    packed = first.path.read_bytes()
    assert first.digest == "sha256:" + hashlib.sha256(packed).hexdigest() and first.size == len(packed)
    assert first.diff_id == "sha256:" + hashlib.sha256(gzip.decompress(packed)).hexdigest()
    with tarfile.open(first.path) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["bin"].issym() and members["bin"].linkname == "opt/app"
    assert "bin/run" not in members  # a link to a directory is not followed
    assert members["opt/app/run"].mode & 0o777 == 0o755 and members["opt/app/run"].mtime == 0


def test_pods_stay_on_a_bridge_inside_this_machine(tmp_path: Path) -> None:
    bridge = cni_config(tmp_path)["plugins"][0]
    assert bridge["bridge"] == BRIDGE
    assert bridge["ipMasq"] is False  # no masquerade: a pod reaches nothing beyond this machine


def test_every_process_of_the_cluster_runs_inside_its_namespace_but_the_loopback_relay(tmp_path: Path) -> None:
    kube = LocalKube(tmp_path)
    kubelet = kubelet_config(kube.kubelet_port, kube.pki, kube.containerd_socket, kube.home)
    assert kubelet["address"] == NODE_IP
    assert kubelet["healthzBindAddress"] == "127.0.0.1"
    assert kubelet["failCgroupV1"] is False
    assert "restrict_oom_score_adj = true" in containerd_config(tmp_path, kube.containerd_socket)
    binaries = _NoBinaries()
    for name in kube.COMPONENTS:
        argv = kube.command(name, binaries)  # type: ignore[arg-type]
        if name == "relay":
            assert argv[1:4] == ["-m", "dr_stream.dev.kube_relay", NAMESPACE.name]
            assert "nsenter" not in argv
        else:
            assert argv[:2] == ["nsenter", f"--net=/run/netns/{NAMESPACE.name}"], argv
            assert "localhost:" not in " ".join(argv)  # a name could resolve outside the namespace
    # what this machine dials: the relay on its loopback; the node's address nowhere outside
    assert kube.server == "https://127.0.0.1:16443"
    assert NODE_IP not in (kube._kubeconfig("admin") + kube._kubeconfig("kubelet"))
    assert NODE_IP not in json.dumps(spark_settings(kube.server, tmp_path / "template.json"))


def test_etcd_takes_only_clients_its_own_ca_signed(tmp_path: Path) -> None:
    kube = LocalKube(tmp_path)
    etcd = kube._etcd(_NoBinaries())  # type: ignore[arg-type]
    assert etcd[etcd.index("--listen-client-urls") + 1] == "https://127.0.0.1:12379"
    assert "--client-cert-auth" in etcd
    assert etcd[etcd.index("--trusted-ca-file") + 1] == str(kube.etcd_pki / "ca.pem")
    apiserver = kube._apiserver(_NoBinaries())  # type: ignore[arg-type]
    assert "--etcd-servers=https://127.0.0.1:12379" in apiserver
    assert f"--etcd-keyfile={kube.etcd_pki / 'apiserver-client.key'}" in apiserver


class _NoBinaries:
    def path(self, name: str) -> Path:
        return Path("/nowhere") / name


def _shipped_flow() -> list[dict]:
    import yaml

    from dr_stream.runtime.paths import project_root

    return list(yaml.safe_load_all((project_root() / "deploy" / "kubernetes" / "flow-statefulset.yaml").read_text()))


def test_the_dev_flow_manifest_is_the_shipped_one_on_this_clusters_image_network_and_api_server() -> None:
    import yaml

    from dr_stream.dev.kube_configs import IMAGE, dev_flow_manifest

    shipped = _shipped_flow()
    documents = dev_flow_manifest(shipped, "https://127.0.0.1:16443")
    assert all("namespace" not in d["metadata"] for d in documents)
    assert [d["kind"] for d in documents] == [d["kind"] for d in shipped]
    pod = next(d for d in documents if d["kind"] == "StatefulSet")["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    driver = pod["containers"][0]
    assert driver["image"] == IMAGE and driver["imagePullPolicy"] == "Never"
    assert {"name": "DR_STREAM_KUBERNETES_API", "value": "https://127.0.0.1:16443"} in driver["env"]
    conf = dict(driver["args"][i + 1].split("=", 1) for i, a in enumerate(driver["args"]) if a == "--conf")
    assert conf["spark.kubernetes.container.image"] == IMAGE
    assert len([a for a in driver["args"] if a.startswith("spark.kubernetes.container.image=")]) == 1
    # none of the Secrets only a real cluster holds; Spark's RPC secret is mounted here too
    assert "envFrom" not in driver
    assert [v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v] == ["dr-stream-dc1-to-dc2-rpc"]
    assert {"name": "DR_STREAM_KUBERNETES_SECRET", "value": "dr-stream-dc1-to-dc2"} in driver["env"]
    assert "/etc/dr-stream/rpc" in {m["mountPath"] for m in driver["volumeMounts"]}
    assert not any("secretKeyRef" in a or ".secrets." in a for a in driver["args"])
    # the executors' pod template is mounted where the driver is told to read it
    template = conf["spark.kubernetes.executor.podTemplateFile"]
    mounts = {m["mountPath"]: m["name"] for m in driver["volumeMounts"]}
    volume = next(v for v in pod["volumes"] if v["name"] == mounts[str(Path(template).parent)])
    config_map = next(d for d in documents if d["metadata"]["name"] == volume["configMap"]["name"])
    executor = yaml.safe_load(config_map["data"][Path(template).name])["spec"]
    assert executor["hostNetwork"] is True
    assert executor["securityContext"]["runAsNonRoot"] is True  # the shipped template's, kept
    # the shipped documents themselves are untouched
    assert "namespace" in shipped[0]["metadata"]


def test_the_relay_carries_the_ports_a_connection_to_loopback_finds_listening() -> None:
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    tcp = header + "".join(f"   {i}: {local} 00000000:0000 {state} 00000000:00000000 00:00000000 00000000 0 0 1\n"
                           for i, (local, state) in enumerate([
                               ("0100007F:5274", "0A"),  # 127.0.0.1:21108 listening
                               ("00000000:0016", "0A"),  # every address, port 22
                               ("0100007F:9C40", "01"),  # an established connection, not a listener
                               ("0A0A0A0A:1F90", "0A"),  # 10.10.10.10:8080: not reached through loopback
                           ]))
    tcp6 = header + "".join(f"   {i}: {local} 00000000000000000000000000000000:0000 0A 0:0 0:0 0 0 0 1\n"
                            for i, local in enumerate([
                                "00000000000000000000000000000000:4E20",  # [::]:20000
                                "0000000000000000FFFF00000100007F:4E21",  # [::ffff:127.0.0.1]:20001
                                "00000000000000000000000001000000:4E22",  # [::1]:20002, IPv6 loopback only
                            ]))
    assert loopback_listeners([tcp, tcp6]) == {21108, 22, 20000, 20001}


def test_the_charts_dev_values_drop_what_only_a_real_cluster_has_and_keep_its_other_defaults() -> None:
    import yaml

    from dr_stream.dev.kube_configs import IMAGE, dev_helm_values
    from dr_stream.runtime.paths import project_root

    shipped = yaml.safe_load((project_root() / "deploy" / "helm" / "dr-stream" / "values.yaml").read_text())
    dev = dev_helm_values(shipped, "https://127.0.0.1:16443")
    assert f"{dev['image']['repository']}:{dev['image']['tag']}" == IMAGE and dev["image"]["pullPolicy"] == "Never"
    # Helm removes a default given null: the object store's keys and the truststore are not here
    dropped = {k for k, v in dev["sparkConf"].items() if v is None}
    assert dropped == {k for k in shipped["sparkConf"] if "secret" in k or "s3a" in k}
    assert dev["sparkConf"]["spark.executor.instances"] == "1"
    assert (dev["secrets"]["env"], dev["secrets"]["tls"]) == ("", "")
    assert dev["secrets"]["kubernetes"] == shipped["secrets"]["kubernetes"]  # Spark's RPC secret stays
    assert dev["flow"] == shipped["flow"] and dev["metrics"] == shipped["metrics"]
