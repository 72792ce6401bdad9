"""The dev Kubernetes keeps its traffic on this machine by construction: run from a network
namespace whose every non-loopback packet is caught (a trap standing for this machine's own
network), a half-done `up`, an `up` to a Ready node and a `down` send nothing out of it, the node's
address among the rest. `make test-k8s` runs it (not `make test`)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dr_stream.dev.commands import ensure_debian_packages
from dr_stream.dev.kube import DEBIAN_PACKAGES, LocalKube
from dr_stream.dev.kube_build import binaries, build
from dr_stream.dev.kube_image import pause_archive
from dr_stream.dev.kube_network import NAMESPACE, NODE_IP
from dr_stream.dev.netns import NetworkNamespace
from dr_stream.runtime.paths import project_root
from tests.kafka_tools import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.kube]
TRAP = NetworkNamespace("drs-trap")
ETH_P_ALL = 0x0003

# What the test runs inside the trap, as a person would run `dr-stream dev k8s ...` there.
SCRIPT = """
import sys
from pathlib import Path
from dr_stream.dev.kube import LocalKube
from dr_stream.dev.kube_commands import kube_command
kube = LocalKube(Path(sys.argv[1]))
if sys.argv[2] == "up":
    kube.up(say=print, timeout=300, with_image=False)
    sys.exit(0)
sys.exit(kube_command(sys.argv[2], kube))
"""


class Catch:
    """Every IPv4 packet that leaves the trap's one route out, its device `trap0`."""

    def __init__(self) -> None:
        self.raw = TRAP.socket_in(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.raw.bind(("trap0", 0))
        self.raw.settimeout(0.2)
        self.caught: list[tuple[str, int]] = []
        self.running = True
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while self.running:
            try:
                frame, (_, _, kind, *_) = self.raw.recvfrom(65536)
            except (TimeoutError, OSError):
                continue
            if kind == socket.PACKET_OUTGOING and frame[12:14] == b"\x08\x00":
                packet = frame[14:]
                header = (packet[0] & 0xF) * 4
                port = int.from_bytes(packet[header + 2:header + 4], "big") if packet[9] in (6, 17) else 0
                self.caught.append((socket.inet_ntoa(packet[16:20]), port))

    def close(self) -> None:
        self.running = False
        self.reader.join()
        self.raw.close()


@pytest.fixture(scope="module")
def trap() -> Iterator[NetworkNamespace]:
    TRAP.create()
    # the way out: one end of a pair whose other end answers nothing; no ARP, so a packet to any
    # address leaves at once as itself
    TRAP.ip("link", "add", "trap0", "type", "veth", "peer", "name", "trap1")
    TRAP.ip("link", "set", "trap0", "arp", "off")
    TRAP.ip("addr", "add", "192.0.2.1/24", "dev", "trap0")  # TEST-NET-1: nobody's
    for end in ("trap0", "trap1"):
        TRAP.ip("link", "set", end, "up")
    TRAP.ip("route", "add", "default", "dev", "trap0")
    try:
        yield TRAP
    finally:
        TRAP.delete()


def _in_trap(kube: LocalKube, action: str, timeout: float = 420) -> subprocess.CompletedProcess:
    return subprocess.run(TRAP.command([sys.executable, "-c", SCRIPT, str(kube.home), action]),
                          cwd=project_root(), capture_output=True, text=True, timeout=timeout)


def _kubectl_in_trap(kube: LocalKube, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(TRAP.command([str(binaries().path("kubectl")), f"--kubeconfig={kube.kubeconfig}",
                                        "--request-timeout=5s", *args]),
                          capture_output=True, text=True, timeout=60)


def test_up_half_done_up_and_down_send_nothing_off_the_machine(trap: NetworkNamespace, tmp_path: Path) -> None:
    ensure_debian_packages(DEBIAN_PACKAGES)
    build()  # outside the trap: the Go module proxy is the one address a build dials
    kube = LocalKube(tmp_path / "k8s")
    pause_archive(kube.home / "images")  # the same
    catch = Catch()
    try:
        # the catch sees what would have been routed off the machine: a dial of the node's address
        # from outside the cluster's namespace, as the bridge-on-the-machine design allowed
        probe = TRAP.socket_in()
        probe.setblocking(False)
        probe.connect_ex((NODE_IP, 16443))
        assert wait_until(lambda: (NODE_IP, 16443) in catch.caught, 5), catch.caught
        probe.close()
        catch.caught.clear()

        # up, killed once the API server is starting: half done
        half = subprocess.Popen(TRAP.command([sys.executable, "-c", SCRIPT, str(kube.home), "up"]),
                                cwd=project_root(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        assert wait_until(lambda: (kube.home / "pids" / "kube-apiserver.pid").exists(), 300)
        os.killpg(half.pid, signal.SIGKILL)
        half.wait()
        status = _in_trap(kube, "status")
        assert status.returncode == 1 and "kube: partly running" in status.stdout, status.stdout
        _kubectl_in_trap(kube, "get", "nodes")  # whatever it answers, it asks 127.0.0.1
        assert NAMESPACE.exists()

        # up again from there, to a Ready node: idempotent from a half-done start
        up = _in_trap(kube, "up")
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
        nodes = _kubectl_in_trap(kube, "get", "nodes", "-o", "json")
        assert nodes.returncode == 0, nodes.stderr
        [node] = json.loads(nodes.stdout)["items"]
        assert {a["type"]: a["address"] for a in node["status"]["addresses"]}["InternalIP"] == NODE_IP
        _etcd_takes_its_own_clients_only(kube)

        down = _in_trap(kube, "down")
        assert down.returncode == 0 and "stopped" in down.stdout, down.stdout + down.stderr
        assert not NAMESPACE.exists()
        after = _in_trap(kube, "status")
        assert after.returncode == 1 and "kube: stopped" in after.stdout, after.stdout
        left = _kubectl_in_trap(kube, "get", "nodes")
        assert left.returncode != 0 and "127.0.0.1:16443" in left.stderr, left.stderr
        time.sleep(1)
    finally:
        catch.close()
        if NAMESPACE.exists():
            _in_trap(kube, "down")
    assert catch.caught == [], f"sent off the machine: {catch.caught}"
    assert not Path("/sys/class/net/drkube0").exists()


def _etcd_takes_its_own_clients_only(kube: LocalKube) -> None:
    """etcd answers inside the namespace over TLS to the API server's certificate, refuses the
    cluster administrator's (signed by the cluster's CA, not etcd's) and a client with none;
    every private key is its owner's alone."""
    def health(certificate: str | None) -> bytes:
        folder = kube.etcd_pki if certificate == "apiserver-client" else kube.pki
        return kube.etcd_health(folder / f"{certificate}.crt" if certificate else None,
                                folder / f"{certificate}.key" if certificate else None)

    assert b'"health":"true"' in health("apiserver-client")
    assert health("admin") == b""
    assert health(None) == b""
    keys = [*kube.pki.glob("*.key"), *kube.etcd_pki.glob("*.key")]
    assert {k.name for k in keys} >= {"ca.key", "sa.key", "admin.key", "server.key", "apiserver-client.key"}
    assert {oct(k.stat().st_mode & 0o777) for k in keys} == {"0o600"}
