"""The dev Kubernetes' network: a network namespace of its own, the bridge in it, the cluster's DNS.

Every process of the cluster runs inside the namespace `drkube` (`dev k8s up` makes it, `down`
removes it), and so does every pod: the node's address 10.244.0.1/24 is the gateway of the
bridge `drkube0` there (Kubernetes refuses a loopback node address), and pods without the
node's network get their addresses on it. Those addresses exist in that namespace only: on this
machine's own network 10.244.0.1 is nobody, so nothing here is ever told to dial it; a process
outside reaches the cluster through `kube_relay` on 127.0.0.1 alone. Nothing is masqueraded or
routed out of the namespace, and its DNS answers the cluster's own names only, so no pod's
traffic or lookup leaves the machine.
"""

from __future__ import annotations

import random
import socket
import struct
from pathlib import Path
from typing import Any

from dr_stream.dev.commands import run
from dr_stream.dev.netns import NetworkNamespace

NAMESPACE = NetworkNamespace("drkube")
BRIDGE = "drkube0"
POD_SUBNET = "10.244.0.0/24"
NODE_IP = "10.244.0.1"  # the bridge's own address inside NAMESPACE: the pods' gateway and the node's address
CLUSTER_DOMAIN = "cluster.local"
SERVICE_RANGE = "10.96.0.0/24"


def ensure_network(namespace: NetworkNamespace = NAMESPACE) -> None:
    """The namespace, and the pods' bridge in it with the node's address, made before anything
    listens there (the CNI plugin finds the bridge and keeps it)."""
    namespace.create()
    if BRIDGE not in namespace.ip("-o", "link", "show"):
        namespace.ip("link", "add", BRIDGE, "type", "bridge")
    if NODE_IP not in namespace.ip("-4", "addr", "show", "dev", BRIDGE):
        namespace.ip("addr", "add", f"{NODE_IP}/24", "dev", BRIDGE)
    namespace.ip("link", "set", BRIDGE, "up")


def remove_network(namespace: NetworkNamespace = NAMESPACE) -> None:
    """The namespace goes, and its bridge and addresses with it; so does a bridge an older
    dr-stream made on this machine's own network."""
    namespace.delete()
    if Path(f"/sys/class/net/{BRIDGE}").exists():
        run("ip", "link", "delete", BRIDGE, check=False)


def cni_config(ipam_dir: Path) -> dict[str, Any]:
    """One bridge inside this machine for pods without the node's network: no masquerade, so a
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


def dns_answers(name: str, server: str = NODE_IP, timeout: float = 1.0,
                namespace: NetworkNamespace = NAMESPACE) -> list[str]:
    """The IPv4 addresses `server` inside `namespace` gives for `name` (one A query over UDP); []
    for none, or when the namespace is gone."""
    ident = random.randrange(1 << 16)
    question = b"".join(bytes([len(part)]) + part.encode() for part in name.rstrip(".").split(".")) + b"\0"
    query = struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0) + question + struct.pack(">HH", 1, 1)
    try:
        udp = namespace.socket_in(socket.AF_INET, socket.SOCK_DGRAM)
    except OSError:
        return []
    with udp:
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
