"""A single-node Kubernetes on this machine, for development and `make test-k8s`: `dr-stream dev k8s up`.

What runs, each a process of its own started here and stopped by the PID recorded at its
start: etcd, kube-apiserver, kube-controller-manager and kube-scheduler (built from the Go module
proxy by `kube_build`), containerd with runc and the CNI plugins (Debian's packages), and one
kubelet. No Docker and no registry: images are imported into containerd (`import_image`), the
pod sandbox's own `pause` image among them, built here from a few lines of Go.

Networking never leaves the machine, by construction: every process of the cluster but the
relay runs inside the network namespace `drkube` that `up` makes and `down` removes
(`kube_network`), where the node's address 10.244.0.1 is the gateway of the bridge `drkube0`;
pods on the node's network share that namespace, the others get an address on its bridge, and
no route leads out. This machine's side never dials the node's address: `kube_relay` carries
127.0.0.1:16443 here to the API server inside, and every port listening on this machine's
loopback (the dev Kafka clusters, HDFS) to the namespace's own loopback. Inside, etcd listens on
127.0.0.1 with TLS and client certificates of a CA of its own; the API server on every address
of the namespace; the kubelet on the node's address. Ports: etcd 12379/12380, the API server
16443, the kubelet 11250 (health 11248), none of them in the ephemeral range.

Invariants: `up` is idempotent (what runs is left running; binaries, packages and certificates
are made once), returns only when the node is Ready, and `down` deletes every pod before it
stops the kubelet and containerd, so no container, shim, namespace or bridge address outlives
it; a private key is readable by its owner only.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from dr_stream.dev.certificates import make_ca, signed
from dr_stream.dev.commands import ensure_debian_packages, run
from dr_stream.dev.kube_build import KubeBinaries, binaries, build
from dr_stream.dev.kube_configs import (
    CERTIFICATES,
    ETCD_CERTIFICATES,
    IMAGE,
    NODE,
    POD_TEMPLATE,
    RESERVED_INSIDE,
    SPARK_ACCOUNT,
    containerd_config,
    dev_flow_manifest,
    dev_helm_values,
    kubelet_config,
    spark_settings,
)
from dr_stream.dev.kube_image import build_image, pause_archive
from dr_stream.dev.kube_network import (
    CLUSTER_DOMAIN,
    NAMESPACE,
    NODE_IP,
    SERVICE_RANGE,
    cni_config,
    corefile,
    dns_answers,
    ensure_network,
    remove_network,
)
from dr_stream.dev.netns import NetworkNamespace
from dr_stream.dev.processes import loopback_listening, running_pid, stop_pids
from dr_stream.runtime.paths import cache_dir, project_root

DEBIAN_PACKAGES = {"containerd": "/usr/bin/containerd", "runc": "/usr/sbin/runc",
                   "containernetworking-plugins": "/usr/lib/cni/bridge"}
CERT_DAYS = 30
SHIPPED_FLOW_MANIFEST = "deploy/kubernetes/flow-statefulset.yaml"
SHIPPED_HELM_VALUES = "deploy/helm/dr-stream/values.yaml"

Say = Callable[[str], None]


@dataclass(frozen=True)
class LocalKube:
    """The dev Kubernetes under `home`; `kubeconfig` is the administrator's (system:masters)."""

    home: Path
    api_port: int = 16443
    etcd_port: int = 12379
    kubelet_port: int = 11250
    namespace: NetworkNamespace = NAMESPACE

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
    def kubectl_dir(self) -> Path:
        """A directory for PATH whose kubectl is the one built with this cluster."""
        return self.home / "bin"

    @property
    def flow_manifest(self) -> Path:
        """The shipped flow StatefulSet as it runs here (`kube_configs.dev_flow_manifest`)."""
        return self.home / "flow-statefulset.yaml"

    @property
    def helm_values(self) -> Path:
        """The Helm chart's values as they run here (`kube_configs.dev_helm_values`)."""
        return self.home / "helm-values.yaml"

    @property
    def server(self) -> str:
        """The API server as every client sees it: 127.0.0.1 here (through the relay) and inside
        the namespace alike."""
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def etcd_pki(self) -> Path:
        """etcd's own CA, its server certificate and the API server's client certificate."""
        return self.pki / "etcd"

    def _pid_file(self, name: str) -> Path:
        return self.home / "pids" / f"{name}.pid"

    # the order they start in; `down` stops them in reverse
    COMPONENTS = ("relay", "etcd", "containerd", "kube-apiserver", "coredns", "kube-controller-manager",
                  "kube-scheduler", "kubelet")

    def pids(self) -> dict[str, int | None]:
        return {name: running_pid(self._pid_file(name)) for name in self.COMPONENTS}

    def is_running(self) -> bool:
        return all(pid is not None for pid in self.pids().values())

    # -- up ---------------------------------------------------------------------------------
    def up(self, say: Say = print, timeout: float = 300, with_image: bool = True) -> None:
        ensure_debian_packages(DEBIAN_PACKAGES, say)
        kube = build(say=say)
        self._make_pki(say)
        self._write_configs()
        self._link_kubectl(kube)
        pause = pause_archive(self.home / "images")
        if not any(self.pids().values()):
            self._refuse_taken_ports()
        ensure_network(self.namespace)
        for name in self.COMPONENTS:
            if running_pid(self._pid_file(name)) is not None:
                continue
            if name == "kubelet":
                self.import_image(pause)
            say(f"kube: starting {name} ...")
            self._start(name, self.command(name, kube))
            if name == "relay":
                self._wait(self._relay_listening, "the relay", 30)
            if name == "containerd":
                self._wait(lambda: self.containerd_socket.exists(), "containerd's socket", 60)
            if name == "etcd":
                self._wait(self._etcd_healthy, "etcd", 60)
            if name == "kube-apiserver":
                self._wait(self._api_ready, "the API server", 120)
            if name == "coredns":
                self._wait(lambda: bool(dns_answers(f"kubernetes.default.svc.{CLUSTER_DOMAIN}",
                                                    namespace=self.namespace)), "the DNS", 60)
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
        from dr_stream.runtime.dist import build as build_dist
        from dr_stream.runtime.dist import dist_dir

        if not (dist_dir() / "requirements.txt").exists():
            say("kube: building what a cluster runs (make dist) ...")
            build_dist(dist_dir())
        archive = build_image(say=say)
        imported = self.home / "images" / "dr-stream.imported"
        held = self._ctr("images", "ls", "-q", f"name=={IMAGE}", check=False).split()
        if held and imported.exists() and imported.read_text() == archive.name:
            return
        say(f"kube: importing {IMAGE} into containerd ...")
        self.import_image(archive)
        imported.write_text(archive.name)

    def _refuse_taken_ports(self) -> None:
        """One line naming the port when another process holds one of this cluster's: the API
        server's on this machine's loopback (the relay's), the others inside the namespace when it
        is left from an earlier cluster. The node's address is dialled inside the namespace only."""
        inside = [("127.0.0.1", port) for port in (self.etcd_port, self.etcd_port + 1, self.api_port)]
        taken = [port for host, port in [*inside, (NODE_IP, self.kubelet_port)] if self.namespace.connects(host, port)]
        if loopback_listening(self.api_port):
            taken.append(self.api_port)
        if taken:
            raise RuntimeError(f"kube: port {taken[0]} is taken (another dev Kubernetes? "
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
        wanted = json.dumps([CERTIFICATES, ETCD_CERTIFICATES])
        if (stamp.exists() and stamp.read_text() == wanted
                and time.time() - stamp.stat().st_mtime < (CERT_DAYS - 7) * 86400):
            return
        say(f"kube: making certificates in {pki} ...")
        shutil.rmtree(pki, ignore_errors=True)
        pki.mkdir(parents=True, mode=0o700)
        make_ca(pki, "/CN=dr-stream dev kubernetes CA", CERT_DAYS)
        run("openssl", "genrsa", "-out", "sa.key", "2048", cwd=pki)
        run("openssl", "rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
        for name, subject, extensions in CERTIFICATES:
            signed(pki, name, subject, extensions, CERT_DAYS)
        # etcd trusts its own CA only: a certificate the cluster's CA signs (a node's, an
        # administrator's) opens the API server, never the store behind it
        self.etcd_pki.mkdir(mode=0o700)
        make_ca(self.etcd_pki, "/CN=dr-stream dev etcd CA", CERT_DAYS)
        for name, subject, extensions in ETCD_CERTIFICATES:
            signed(self.etcd_pki, name, subject, extensions, CERT_DAYS)
        for key in (*pki.glob("*.key"), *self.etcd_pki.glob("*.key")):
            key.chmod(0o600)
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
        (self.home / "kubelet.yaml").write_text(
            json.dumps(kubelet_config(self.kubelet_port, self.pki, self.containerd_socket, self.home), indent=1))
        (self.home / "Corefile").write_text(corefile(self.kubeconfig))
        conf = self.spark_conf_dir
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "pod-template.json").write_text(json.dumps(POD_TEMPLATE, indent=1))
        settings = spark_settings(self.server, conf / "pod-template.json")
        (conf / "spark-defaults.conf").write_text("".join(f"{key} {value}\n" for key, value in settings.items()))
        shipped = list(yaml.safe_load_all((project_root() / SHIPPED_FLOW_MANIFEST).read_text()))
        self.flow_manifest.write_text(yaml.safe_dump_all(dev_flow_manifest(shipped, self.server), sort_keys=False))
        values = yaml.safe_load((project_root() / SHIPPED_HELM_VALUES).read_text())
        self.helm_values.write_text(yaml.safe_dump(dev_helm_values(values, self.server), sort_keys=False))

    def _link_kubectl(self, kube: KubeBinaries) -> None:
        link = self.kubectl_dir / "kubectl"
        self.kubectl_dir.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() and link.resolve() == kube.path("kubectl").resolve():
            return
        link.unlink(missing_ok=True)
        link.symlink_to(kube.path("kubectl"))

    def import_image(self, archive: Path) -> None:
        """Imports an OCI archive (`oci_image.write_archive`) into the namespace the kubelet uses."""
        self._ctr("images", "import", str(archive))

    def _ctr(self, *args: str, check: bool = True) -> str:
        """containerd's own client, on this cluster's socket, in the namespace the kubelet uses."""
        return run("ctr", "--address", str(self.containerd_socket), "-n", "k8s.io", *args, check=check)

    # -- the processes' command lines -------------------------------------------------------
    def command(self, name: str, kube: KubeBinaries) -> list[str]:
        """How component `name` starts: inside the namespace, but for the relay that joins it to
        this machine's loopback."""
        starts = {"relay": self._relay, "etcd": self._etcd, "containerd": self._containerd,
                  "kube-apiserver": self._apiserver, "coredns": self._coredns,
                  "kube-controller-manager": self._controller_manager, "kube-scheduler": self._scheduler,
                  "kubelet": self._kubelet}
        argv = starts[name](kube)
        return argv if name == "relay" else self.namespace.command(argv)

    def _relay(self, kube: KubeBinaries) -> list[str]:
        inside = (self.etcd_port, self.etcd_port + 1, self.api_port, self.kubelet_port, self.kubelet_port - 2,
                  *RESERVED_INSIDE)
        return [sys.executable, "-m", "dr_stream.dev.kube_relay", self.namespace.name,
                "--outward", str(self.api_port), "--reserved", ",".join(map(str, sorted(set(inside))))]

    def _relay_listening(self) -> bool:
        return loopback_listening(self.api_port)

    def _etcd(self, kube: KubeBinaries) -> list[str]:
        peer = f"http://127.0.0.1:{self.etcd_port + 1}"
        tls = self.etcd_pki
        return [str(kube.path("etcd")), "--name", "dev", "--data-dir", str(self.home / "etcd"),
                "--listen-client-urls", f"https://127.0.0.1:{self.etcd_port}",
                "--advertise-client-urls", f"https://127.0.0.1:{self.etcd_port}",
                "--client-cert-auth", "--trusted-ca-file", str(tls / "ca.pem"),
                "--cert-file", str(tls / "server.crt"), "--key-file", str(tls / "server.key"),
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"dev={peer}", "--unsafe-no-fsync", "--log-level", "warn"]

    def _containerd(self, kube: KubeBinaries) -> list[str]:
        return ["containerd", "--config", str(self.home / "containerd.toml")]

    def _apiserver(self, kube: KubeBinaries) -> list[str]:
        pki = self.pki
        etcd = self.etcd_pki
        return [str(kube.path("kube-apiserver")), f"--etcd-servers=https://127.0.0.1:{self.etcd_port}",
                f"--etcd-cafile={etcd / 'ca.pem'}", f"--etcd-certfile={etcd / 'apiserver-client.crt'}",
                f"--etcd-keyfile={etcd / 'apiserver-client.key'}",
                # every address of the namespace: the node's for pods on the bridge, 127.0.0.1 for
                # the relay and for pods on the node's network
                "--bind-address=0.0.0.0", f"--advertise-address={NODE_IP}", f"--secure-port={self.api_port}",
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
        return run(str(binaries().path("kubectl")), f"--kubeconfig={self.kubeconfig}", *args, check=check,
                   stdin=stdin)

    def _etcd_healthy(self) -> bool:
        return b'"true"' in self.etcd_health(self.etcd_pki / "apiserver-client.crt",
                                              self.etcd_pki / "apiserver-client.key")

    def etcd_health(self, certificate: Path | None, key: Path | None) -> bytes:
        """etcd's answer to /health inside the namespace, asked over TLS with that client
        certificate (or none); b"" when it does not answer or refuses the client."""
        tls = ssl.create_default_context(cafile=str(self.etcd_pki / "ca.pem"))
        if certificate is not None:
            tls.load_cert_chain(certificate, key)
        try:
            with self.namespace.socket_in() as raw:
                raw.settimeout(2)
                raw.connect(("127.0.0.1", self.etcd_port))
                with tls.wrap_socket(raw, server_hostname="127.0.0.1") as conn:
                    conn.sendall(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                    answer = b""
                    while chunk := conn.recv(4096):
                        answer += chunk
                    return answer
        except OSError:  # not up yet, gone, or the client refused (ssl.SSLError is an OSError)
            return b""

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
            run("umount", mount, check=False)
        remove_network(self.namespace)
        return stopped

    def mounts(self) -> list[str]:
        """Mount points under `home`, outermost first."""
        home = str(self.home.resolve())
        points = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        return sorted({p for p in points if p == home or p.startswith(home + "/")}, key=len)

    def _remove_containers(self) -> None:
        """Kills and deletes whatever tasks containerd still holds, so their shims exit with it."""
        for task in self._ctr("tasks", "ls", "-q", check=False).split():
            self._ctr("tasks", "kill", "-s", "SIGKILL", task, check=False)
            self._ctr("tasks", "delete", "-f", task, check=False)
        for container in self._ctr("containers", "ls", "-q", check=False).split():
            self._ctr("containers", "delete", container, check=False)


def dev_kube(root: Path | None = None) -> LocalKube:
    return LocalKube((root or cache_dir() / "dev") / "k8s")
