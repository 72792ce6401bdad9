"""The dev Kubernetes' network: one bridge inside this machine, its addresses, the cluster's DNS.

The node's address is the gateway of the bridge `drkube0`, 10.244.0.1/24 (Kubernetes refuses a
loopback node address); pods without the host's network get their addresses on it. Nothing is
masqueraded and nothing is routed out, and the DNS answers the cluster's own names only, so no
pod's traffic or lookup leaves the machine.
"""

from __future__ import annotations

import random
import socket
import struct
from pathlib import Path

from dr_stream.dev.commands import run

BRIDGE = "drkube0"
POD_SUBNET = "10.244.0.0/24"
NODE_IP = "10.244.0.1"  # the bridge's own address: the pods' gateway and the node's address
CLUSTER_DOMAIN = "cluster.local"
SERVICE_RANGE = "10.96.0.0/24"


def bridge_exists() -> bool:
    return Path(f"/sys/class/net/{BRIDGE}").exists()


def ensure_bridge() -> None:
    """The pods' bridge with the node's address, made before anything listens on it (the CNI
    plugin finds it there and keeps it)."""
    if not bridge_exists():
        run("ip", "link", "add", BRIDGE, "type", "bridge")
    if NODE_IP not in run("ip", "-4", "addr", "show", "dev", BRIDGE):
        run("ip", "addr", "add", f"{NODE_IP}/24", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")




def remove_bridge() -> None:
    if bridge_exists():
        run("ip", "link", "delete", BRIDGE, check=False)


def cni_config(ipam_dir: Path) -> dict:
    """One bridge inside this machine for pods without the host's network: no masquerade, so a
    pod reaches only this machine and other pods."""
    return {"cniVersion": "0.4.0", "name": "drkube", "plugins": [
        {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False, "hairpinMode": True,
         "ipam": {"type": "host-local", "dataDir": str(ipam_dir), "ranges": [[{"subnet": POD_SUBNET}]]}},
        {"type": "portmap", "capabilities": {"portMappings": True}},
    ]}


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


def listening(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex((host, port)) == 0
