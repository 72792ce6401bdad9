"""A single-node Kubernetes on this machine, for development and `make test-k8s`: `dr-stream dev k8s up`.

What runs, each a process of its own started here and stopped by the PID recorded at its
start: etcd, kube-apiserver, kube-controller-manager and kube-scheduler (built from the Go module
proxy by `kube_build`), containerd with runc and the CNI plugins (Debian's packages), and one
kubelet. No Docker and no registry: images are imported into containerd (`import_image`), the
pod sandbox's own `pause` image among them, built here from a few lines of Go.

Networking never leaves the machine. The node's address is the gateway of a bridge made here,
`drkube0` at 10.244.0.1/24 (Kubernetes refuses a loopback node address); the API server and the
kubelet listen there, etcd and the health ports on 127.0.0.1; pods without the host's network
get an address on the same bridge, with no masquerade and no route out. Ports: etcd
12379/12380, the API server 16443, the kubelet 11250 (health 11248), none of them in the
ephemeral range.

Invariants: `up` is idempotent (what runs is left running; binaries, packages and certificates
are made once), returns only when the node is Ready, and `down` deletes every pod before it
stops the kubelet and containerd, so no container, shim or bridge address outlives it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dr_stream.dev import oci_image
from dr_stream.dev.certificates import signed
from dr_stream.dev.kube_build import KubeBinaries, binaries, build
from dr_stream.dev.processes import running_pid, stop_pids
from dr_stream.runtime.paths import cache_dir

DEBIAN_PACKAGES = {"containerd": "/usr/bin/containerd", "runc": "/usr/sbin/runc",
                   "containernetworking-plugins": "/usr/lib/cni/bridge"}
CNI_BIN = Path("/usr/lib/cni")
NODE = "drs-node"
BRIDGE = "drkube0"
POD_SUBNET = "10.244.0.0/24"
NODE_IP = "10.244.0.1"  # the bridge's own address: the pods' gateway and the node's address
CLUSTER_DOMAIN = "cluster.local"
SERVICE_RANGE = "10.96.0.0/24"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
CERT_DAYS = 30
CLIENT = "extendedKeyUsage=clientAuth\n"
_SERVER_NAMES = (f"IP:{NODE_IP},IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
                 "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local")
# (file name, subject, extensions) of each certificate the dev CA signs
CERTIFICATES = (
    ("apiserver", "/CN=kube-apiserver", f"subjectAltName={_SERVER_NAMES}\nextendedKeyUsage=serverAuth\n"),
    ("apiserver-kubelet", "/O=system:masters/CN=kube-apiserver-kubelet-client", CLIENT),
    ("admin", "/O=system:masters/CN=dr-stream-admin", CLIENT),
    ("kubelet", f"/O=system:nodes/CN=system:node:{NODE}", CLIENT),
)

PAUSE_GO = """package main

// The pod sandbox's first process: holds the pod's namespaces until it is told to stop.
import (
\t"os"
\t"os/signal"
\t"syscall"
)

func main() {
\tstop := make(chan os.Signal, 1)
\tsignal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
\t<-stop
}
"""

# The account Spark's driver runs as: it creates and deletes its executor pods and their Service.
SPARK_ACCOUNT = json.dumps({"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "spark", "namespace": "default"}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
     "metadata": {"name": "spark-edit", "namespace": "default"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
     "subjects": [{"kind": "ServiceAccount", "name": "spark", "namespace": "default"}]},
]})

Say = Callable[[str], None]


def _run(*command: str, cwd: Path | None = None, env: dict[str, str] | None = None, check: bool = True,
         stdin: str | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, input=stdin)
    if check and done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-600:]
        raise RuntimeError(f"{command[0]} {' '.join(command[1:3])} failed: {said}")
    return done.stdout


@dataclass(frozen=True)
class LocalKube:
    """The dev Kubernetes under `home`; `kubeconfig` is the administrator's (system:masters)."""

    home: Path
    api_port: int = 16443
    etcd_port: int = 12379
    kubelet_port: int = 11250

    # -- where things are -------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.home / "admin.kubeconfig"

    @property
    def pki(self) -> Path:
        return self.home / "pki"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def containerd_socket(self) -> Path:
        return self.home / "run" / "containerd.sock"

    @property
    def spark_conf_dir(self) -> Path:
        """A SPARK_CONF_DIR whose spark-defaults.conf submits to this cluster (`spark_settings`)."""
        return self.home / "spark-conf"

    @property
    def server(self) -> str:
        return f"https://{NODE_IP}:{self.api_port}"

    def _pid_file(self, name: str) -> Path:
        return self.home / "pids" / f"{name}.pid"

    # the order they start in; `down` stops them in reverse
    COMPONENTS = ("etcd", "containerd", "kube-apiserver", "coredns", "kube-controller-manager", "kube-scheduler",
                  "kubelet")

    def pids(self) -> dict[str, int | None]:
        return {name: running_pid(self._pid_file(name)) for name in self.COMPONENTS}

    def is_running(self) -> bool:
        return all(pid is not None for pid in self.pids().values())

    # -- up ---------------------------------------------------------------------------------
    def up(self, say: Say = print, timeout: float = 300, with_image: bool = True) -> None:
        ensure_debian_packages(say)
        kube = build(say=say)
        self._make_pki(say)
        self._write_configs()
        pause = self._pause_archive()
        starts = {"etcd": self._etcd, "containerd": self._containerd, "kube-apiserver": self._apiserver,
                  "coredns": self._coredns,
                  "kube-controller-manager": self._controller_manager, "kube-scheduler": self._scheduler,
                  "kubelet": self._kubelet}
        if not any(self.pids().values()):
            self._refuse_taken_ports()
        ensure_bridge()
        for name in self.COMPONENTS:
            if running_pid(self._pid_file(name)) is not None:
                continue
            if name == "kubelet":
                self.import_image(pause)
            say(f"kube: starting {name} ...")
            self._start(name, starts[name](kube))
            if name == "containerd":
                self._wait(lambda: self.containerd_socket.exists(), "containerd's socket", 60)
            if name == "etcd":
                self._wait(self._etcd_healthy, "etcd", 60)
            if name == "kube-apiserver":
                self._wait(self._api_ready, "the API server", 120)
            if name == "coredns":
                self._wait(lambda: bool(dns_answers(f"kubernetes.default.svc.{CLUSTER_DOMAIN}")), "the DNS", 60)
        self._wait(self.node_ready, f"node {NODE} Ready", timeout)
        # the first pod of a new cluster needs the namespace's service account, made a moment later
        self._wait(lambda: bool(self.kubectl("get", "serviceaccount", "default", "-o", "name", check=False)),
                   "the default service account", 60)
        self.kubectl("apply", "-f", "-", stdin=SPARK_ACCOUNT)
        if with_image:
            self._import_dr_stream_image(say)

    def _import_dr_stream_image(self, say: Say) -> None:
        """dr-stream's driver and executor image (`kube_image`), built when its inputs changed and
        imported unless containerd already holds that build."""
        from dr_stream.dev.kube_image import IMAGE, build_image
        from dr_stream.runtime.dist import build as build_dist
        from dr_stream.runtime.dist import dist_dir

        if not (dist_dir() / "requirements.txt").exists():
            say("kube: building what a cluster runs (make dist) ...")
            build_dist(dist_dir())
        archive = build_image(say=say)
        imported = self.home / "images" / "dr-stream.imported"
        held = _run("ctr", "--address", str(self.containerd_socket), "-n", "k8s.io", "images", "ls", "-q",
                    f"name=={IMAGE}", check=False).split()
        if held and imported.exists() and imported.read_text() == archive.name:
            return
        say(f"kube: importing {IMAGE} into containerd ...")
        self.import_image(archive)
        imported.write_text(archive.name)

    def _refuse_taken_ports(self) -> None:
        """One line naming the port when another process holds one of this cluster's."""
        # the bridge's address only once the bridge is here: without it, the address is routed off
        # this machine like any other
        hosts = ["127.0.0.1", *([NODE_IP] if Path(f"/sys/class/net/{BRIDGE}").exists() else [])]
        for port in (self.etcd_port, self.etcd_port + 1, self.api_port, self.kubelet_port):
            if any(_listening(host, port) for host in hosts):
                raise RuntimeError(f"kube: port {port} is taken (another dev Kubernetes? "
                                   f"`dr-stream dev k8s down` stops the one under {cache_dir() / 'dev' / 'k8s'})")

    def _start(self, name: str, command: list[str]) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        self._pid_file(name).parent.mkdir(parents=True, exist_ok=True)
        with (self.logs / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True, cwd=self.home)
        self._pid_file(name).write_text(f"{process.pid}\n")

    def _wait(self, ready: Callable[[], bool], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [n for n, pid in self.pids().items() if pid is None and self._pid_file(n).exists()]
            if dead:
                raise RuntimeError(f"kube: {dead[0]} exited while waiting for {what}; "
                                   f"see {self.logs / (dead[0] + '.log')}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"kube: {what} not ready after {timeout:.0f}s; logs in {self.logs}")
            time.sleep(0.5)

    # -- certificates -----------------------------------------------------------------------
    def _make_pki(self, say: Say) -> None:
        """The CA, the service-account key and each certificate; made again when what they name
        changed or they are within a week of expiring."""
        pki = self.pki
        stamp = pki / "made"
        wanted = json.dumps(CERTIFICATES)
        if (stamp.exists() and stamp.read_text() == wanted
                and time.time() - stamp.stat().st_mtime < (CERT_DAYS - 7) * 86400):
            return
        say(f"kube: making certificates in {pki} ...")
        shutil.rmtree(pki, ignore_errors=True)
        pki.mkdir(parents=True)
        _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", str(CERT_DAYS), "-subj", "/CN=dr-stream dev kubernetes CA", cwd=pki)
        _run("openssl", "genrsa", "-out", "sa.key", "2048", cwd=pki)
        _run("openssl", "rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
        for name, subject, extensions in CERTIFICATES:
            signed(pki, name, subject, extensions, CERT_DAYS)
        stamp.write_text(wanted)

    def _kubeconfig(self, user: str) -> str:
        pki = self.pki
        return json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "dr-stream-dev",
            "clusters": [{"name": "dr-stream-dev", "cluster": {"server": self.server,
                                                                "certificate-authority": str(pki / "ca.pem")}}],
            "users": [{"name": user, "user": {"client-certificate": str(pki / f"{user}.crt"),
                                              "client-key": str(pki / f"{user}.key")}}],
            "contexts": [{"name": "dr-stream-dev", "context": {"cluster": "dr-stream-dev", "user": user}}],
        }, indent=1)

    # -- configuration files ----------------------------------------------------------------
    def _write_configs(self) -> None:
        self.kubeconfig.write_text(self._kubeconfig("admin"))
        (self.home / "kubelet.kubeconfig").write_text(self._kubeconfig("kubelet"))
        (self.home / "cni").mkdir(parents=True, exist_ok=True)
        (self.home / "cni" / "10-drkube.conflist").write_text(json.dumps(cni_config(self.home / "cni-ipam"), indent=1))
        (self.home / "containerd.toml").write_text(containerd_config(self.home, self.containerd_socket))
        (self.home / "kubelet.yaml").write_text(json.dumps(kubelet_config(self), indent=1))
        (self.home / "Corefile").write_text(corefile(self.kubeconfig))
        conf = self.spark_conf_dir
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "pod-template.json").write_text(json.dumps(POD_TEMPLATE, indent=1))
        (conf / "spark-defaults.conf").write_text(
            "".join(f"{key} {value}\n" for key, value in spark_settings(self, conf / "pod-template.json").items()))

    def _pause_archive(self) -> Path:
        archive = self.home / "images" / "pause.tar"
        if archive.exists():
            return archive
        source = self.home / "pause-src"
        source.mkdir(parents=True, exist_ok=True)
        (source / "main.go").write_text(PAUSE_GO)
        if not (source / "go.mod").exists():
            _run("go", "mod", "init", "drstream.dev/pause", cwd=source)
        env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local"}
        _run("go", "build", "-trimpath", "-ldflags=-s -w", "-o", str(source / "pause"), ".", cwd=source, env=env)
        layer = oci_image.layer_from_tar(
            oci_image.layer_tar([oci_image.FileEntry("pause", (source / "pause").read_bytes(), 0o755)]),
            source / "pause.layer")
        oci_image.write_archive(archive, PAUSE_IMAGE, [layer], oci_image.ImageConfig(entrypoint=["/pause"]))
        return archive

    def import_image(self, archive: Path) -> None:
        """Imports an OCI archive (`oci_image.write_archive`) into the namespace the kubelet uses."""
        _run("ctr", "--address", str(self.containerd_socket), "-n", "k8s.io", "images", "import", str(archive))

    # -- the processes' command lines -------------------------------------------------------
    def _etcd(self, kube: KubeBinaries) -> list[str]:
        peer = f"http://127.0.0.1:{self.etcd_port + 1}"
        return [str(kube.path("etcd")), "--name", "dev", "--data-dir", str(self.home / "etcd"),
                "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
                "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"dev={peer}", "--unsafe-no-fsync", "--log-level", "warn"]

    def _containerd(self, kube: KubeBinaries) -> list[str]:
        return ["containerd", "--config", str(self.home / "containerd.toml")]

    def _apiserver(self, kube: KubeBinaries) -> list[str]:
        pki = self.pki
        return [str(kube.path("kube-apiserver")), f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                f"--bind-address={NODE_IP}", f"--advertise-address={NODE_IP}", f"--secure-port={self.api_port}",
                f"--service-cluster-ip-range={SERVICE_RANGE}", f"--client-ca-file={pki / 'ca.pem'}",
                f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc", "--authorization-mode=Node,RBAC",
                f"--kubelet-client-certificate={pki / 'apiserver-kubelet.crt'}",
                f"--kubelet-client-key={pki / 'apiserver-kubelet.key'}", "--allow-privileged=true",
                # the node's name resolves nowhere: logs and exec go to its address
                "--kubelet-preferred-address-types=InternalIP",
                "--profiling=false", "--v=1"]

    def _controller_manager(self, kube: KubeBinaries) -> list[str]:
        pki = self.pki
        return [str(kube.path("kube-controller-manager")), f"--kubeconfig={self.kubeconfig}",
                "--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
                f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.pem'}",
                f"--cluster-signing-cert-file={pki / 'ca.pem'}", f"--cluster-signing-key-file={pki / 'ca.key'}",
                "--use-service-account-credentials=true", "--profiling=false", "--v=1"]

    def _coredns(self, kube: KubeBinaries) -> list[str]:
        return [str(kube.path("coredns")), "-conf", str(self.home / "Corefile")]

    def _scheduler(self, kube: KubeBinaries) -> list[str]:
        return [str(kube.path("kube-scheduler")), f"--kubeconfig={self.kubeconfig}", "--bind-address=127.0.0.1",
                "--secure-port=0", "--leader-elect=false", "--profiling=false", "--v=1"]

    def _kubelet(self, kube: KubeBinaries) -> list[str]:
        return [str(kube.path("kubelet")), f"--config={self.home / 'kubelet.yaml'}",
                f"--kubeconfig={self.home / 'kubelet.kubeconfig'}", f"--root-dir={self.home / 'kubelet'}",
                f"--cert-dir={self.home / 'kubelet-pki'}", f"--hostname-override={NODE}", f"--node-ip={NODE_IP}",
                "--v=1"]

    # -- readiness --------------------------------------------------------------------------
    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> str:
        return _run(str(binaries().path("kubectl")), f"--kubeconfig={self.kubeconfig}", *args, check=check,
                    stdin=stdin)

    def _etcd_healthy(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.etcd_port}/health", timeout=2) as answer:
                return b'"true"' in answer.read()
        except OSError:
            return False

    def _api_ready(self) -> bool:
        return "ok" in self.kubectl("get", "--raw=/readyz", check=False)

    def node_ready(self) -> bool:
        out = self.kubectl("get", "node", NODE, "-o",
                           "jsonpath={.status.conditions[?(@.type=='Ready')].status}", check=False)
        return out.strip() == "True"

    # -- down -------------------------------------------------------------------------------
    def down(self, say: Say = print) -> int:
        """Deletes every pod, then stops what runs, newest first; how many processes were running."""
        if running_pid(self._pid_file("kube-apiserver")) and running_pid(self._pid_file("kubelet")):
            say("kube: deleting every pod ...")
            self.kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=5", "--timeout=90s",
                         check=False)
        stopped = 0
        for name in reversed(self.COMPONENTS):
            if name == "containerd" and running_pid(self._pid_file(name)):
                self._remove_containers()
            stopped += stop_pids([self._pid_file(name)], 30)
        for mount in reversed(self.mounts()):  # the kubelet's own bind mount of its root, any pod volume left
            _run("umount", mount, check=False)
        if Path(f"/sys/class/net/{BRIDGE}").exists():
            _run("ip", "link", "delete", BRIDGE, check=False)
        return stopped

    def mounts(self) -> list[str]:
        """Mount points under `home`, outermost first."""
        home = str(self.home.resolve())
        points = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        return sorted({p for p in points if p == home or p.startswith(home + "/")}, key=len)

    def _remove_containers(self) -> None:
        """Kills and deletes whatever tasks containerd still holds, so their shims exit with it."""
        ctr = ["ctr", "--address", str(self.containerd_socket), "-n", "k8s.io"]
        for task in _run(*ctr, "tasks", "ls", "-q", check=False).split():
            _run(*ctr, "tasks", "kill", "-s", "SIGKILL", task, check=False)
            _run(*ctr, "tasks", "delete", "-f", task, check=False)
        for container in _run(*ctr, "containers", "ls", "-q", check=False).split():
            _run(*ctr, "containers", "delete", container, check=False)


def cni_config(ipam_dir: Path) -> dict:
    """One bridge inside this machine for pods without the host's network: no masquerade, so a
    pod reaches only this machine and other pods."""
    return {"cniVersion": "0.4.0", "name": "drkube", "plugins": [
        {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False, "hairpinMode": True,
         "ipam": {"type": "host-local", "dataDir": str(ipam_dir), "ranges": [[{"subnet": POD_SUBNET}]]}},
        {"type": "portmap", "capabilities": {"portMappings": True}},
    ]}


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


def kubelet_config(kube: LocalKube) -> dict:
    """The kubelet on the bridge's address with cgroupfs (cgroup v1 allowed), client certificates from the
    dev CA, and eviction thresholds low enough for a shared disk."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": NODE_IP, "port": kube.kubelet_port, "healthzBindAddress": "127.0.0.1",
        "healthzPort": kube.kubelet_port - 2, "readOnlyPort": 0,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(kube.pki / "ca.pem")}},
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs", "failCgroupV1": False, "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{kube.containerd_socket}",
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 99, "imageGCLowThresholdPercent": 98,
        "localStorageCapacityIsolation": False, "resolvConf": "/etc/resolv.conf",
        "clusterDNS": [NODE_IP], "clusterDomain": CLUSTER_DOMAIN,
        "serializeImagePulls": False, "maxPods": 30, "podLogsDir": str(kube.home / "pod-logs"),
    }


# Spark's driver and executors share the node's network: the dev Kafka clusters and HDFS listen
# on 127.0.0.1, which a pod on the bridge cannot reach.
POD_TEMPLATE = {"apiVersion": "v1", "kind": "Pod",
                "spec": {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"}}


def spark_settings(kube: LocalKube, pod_template: Path) -> dict[str, str]:
    """What spark-submit needs for this cluster beyond `--master k8s://<server>`: the imported
    image, never pulled; the driver's account; the API server at the node's address (there is no
    kube-proxy behind `kubernetes.default`); pods on the host's network, where each executor's
    block manager takes a free port instead of Spark's fixed 7079 (two pods on one network would
    both claim it); small CPU requests, so a driver and two executors fit on 2 cores."""
    from dr_stream.dev.kube_image import IMAGE

    return {
        "spark.kubernetes.container.image": IMAGE,
        "spark.kubernetes.container.image.pullPolicy": "Never",
        "spark.kubernetes.namespace": "default",
        "spark.kubernetes.authenticate.driver.serviceAccountName": "spark",
        "spark.kubernetes.driver.master": kube.server,
        "spark.kubernetes.driver.podTemplateFile": str(pod_template),
        "spark.kubernetes.executor.podTemplateFile": str(pod_template),
        "spark.blockManager.port": "0",
        "spark.driver.blockManager.port": "7079",
        "spark.kubernetes.driver.request.cores": "0.5",
        "spark.kubernetes.executor.request.cores": "0.5",
    }


def corefile(kubeconfig: Path) -> str:
    """The cluster's DNS on the node's address: Services and pods by name, from the API server.
    Any other name gets no answer from here (NXDOMAIN), so no lookup leaves the machine."""
    return f"""{CLUSTER_DOMAIN}:53 in-addr.arpa:53 {{
    bind {NODE_IP}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa {{
        kubeconfig {kubeconfig} dr-stream-dev
    }}
}}
.:53 {{
    bind {NODE_IP}
    template ANY ANY {{
        rcode NXDOMAIN
    }}
}}
"""


def dns_answers(name: str, server: str = NODE_IP, timeout: float = 1.0) -> list[str]:
    """The IPv4 addresses `server` gives for `name` (one A query over UDP); [] for none."""
    import random
    import socket
    import struct

    ident = random.randrange(1 << 16)
    question = b"".join(bytes([len(part)]) + part.encode() for part in name.rstrip(".").split(".")) + b"\0"
    query = struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0) + question + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.settimeout(timeout)
        try:
            udp.sendto(query, (server, 53))
            answer = udp.recv(4096)
        except OSError:
            return []
    got, flags, _, count = struct.unpack(">HHHH", answer[:8])
    if got != ident or flags & 0xF:
        return []
    at = 12 + len(question) + 4
    found = []
    for _ in range(count):
        at += 2 if answer[at] & 0xC0 == 0xC0 else answer.index(b"\0", at) - at + 1
        kind, _, _, length = struct.unpack(">HHIH", answer[at:at + 10])
        at += 10
        if kind == 1 and length == 4:
            found.append(socket.inet_ntoa(answer[at:at + 4]))
        at += length
    return found


def _listening(host: str, port: int) -> bool:
    import socket

    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex((host, port)) == 0


def ensure_bridge() -> None:
    """The pods' bridge with the node's address, made before anything listens on it (the CNI
    plugin finds it there and keeps it)."""
    if not Path(f"/sys/class/net/{BRIDGE}").exists():
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
    if NODE_IP not in _run("ip", "-4", "addr", "show", "dev", BRIDGE):
        _run("ip", "addr", "add", f"{NODE_IP}/24", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")


def ensure_debian_packages(say: Say = print) -> None:
    """containerd, runc and the CNI plugins from Debian's packages; installs what is missing."""
    missing = [package for package, path in DEBIAN_PACKAGES.items() if not Path(path).exists()]
    if not missing:
        return
    if os.geteuid() != 0:
        raise RuntimeError(f"kube: Debian packages {', '.join(missing)} are missing and only root can install them: "
                           f"apt-get install {' '.join(missing)}")
    say(f"kube: installing {', '.join(missing)} from Debian's packages ...")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _run("apt-get", "install", "-y", "-q", "--no-install-recommends", *missing, env=env)


def dev_kube(root: Path | None = None) -> LocalKube:
    return LocalKube((root or cache_dir() / "dev") / "k8s")
