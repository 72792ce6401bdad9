"""A dev cluster shaped like production: several KRaft nodes, every topic replicated.

`dr-stream dev up --brokers 3` runs each dev cluster as three nodes that are each broker and
controller, so a leader can be killed and the destination restarted node by node while a flow
copies, as in a datacenter. Node 1 keeps the cluster's bootstrap address (`port`), so flow files
written for the single-node clusters work unchanged; node `i` listens on `port + 10 * (i - 1)`
and its controller on the port after it. Topics get the cluster's replication factor by default
(`default.replication.factor`, the internal topics' too): 3, with `min.insync.replicas` 2, so an
acknowledged record (`acks=all`) survives one node lost and a write still succeeds with one node
down.

Invariants: every node is formatted with the one cluster id node 1 keeps; `start`
launches every node before waiting for any (a node answers only once a majority of the quorum
runs) and is idempotent; `stop` signals exactly the PIDs it started, all at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dr_stream.core.config import ClusterConfig
from dr_stream.dev.clusters import DEV_PORTS, LocalCluster, dev_clusters
from dr_stream.dev.processes import running_pid, stop_pids
from dr_stream.runtime.paths import cache_dir

NODE_PORT_STEP = 10
MAX_BROKERS = 5


def replication_settings(brokers: int) -> dict[str, str]:
    """A production shape for `brokers` nodes: three replicas where there are three nodes, and
    writes that need all but one of them."""
    replicas = min(3, brokers)
    in_sync = max(1, replicas - 1)
    return {
        "default.replication.factor": str(replicas),
        "min.insync.replicas": str(in_sync),
        "offsets.topic.replication.factor": str(replicas),
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(in_sync),
        "share.coordinator.state.topic.replication.factor": str(replicas),
        "share.coordinator.state.topic.min.isr": str(in_sync),
        # A record acknowledged by all in-sync replicas is never lost to an out-of-sync leader.
        "unclean.leader.election.enable": "false",
    }


@dataclass(frozen=True)
class ReplicatedCluster:
    """`brokers` KRaft nodes on loopback under `home/node<i>`, answering as one cluster."""

    alias: str
    port: int
    home: Path
    brokers: int = 3
    overrides: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= self.brokers <= MAX_BROKERS:
            raise ValueError(f"{self.alias}: --brokers {self.brokers}: expected 1 to {MAX_BROKERS}")

    @property
    def nodes(self) -> list[LocalCluster]:
        ports = [self.port + NODE_PORT_STEP * i for i in range(self.brokers)]
        voters = tuple((i + 1, port + 1) for i, port in enumerate(ports))
        settings = tuple(replication_settings(self.brokers).items()) + self.overrides
        return [LocalCluster(self.alias, port, self.home / f"node{i + 1}", overrides=settings, node_id=i + 1,
                             voters=voters) for i, port in enumerate(ports)]

    def node(self, node_id: int) -> LocalCluster:
        return self.nodes[node_id - 1]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def all_bootstraps(self) -> str:
        """Every node's address: what a client that must reach the cluster with any node down gives."""
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def config(self) -> ClusterConfig:
        return ClusterConfig(self.alias, self.bootstrap)

    def cluster_id(self) -> str:
        """Node 1's, which the others are formatted with: an id of its own, not the single-node
        cluster's that may have run from the same `home`, because a flow's state tells clusters
        apart by their id."""
        return self.nodes[0].cluster_id()

    def pid(self) -> int | None:
        """Node 1's PID: the node behind the cluster's bootstrap address."""
        return self.nodes[0].pid()

    def is_running(self) -> bool:
        return all(node.is_running() for node in self.nodes)

    def start(self, timeout: float = 120.0) -> None:
        self.launch()
        self.wait_ready(timeout)

    def launch(self) -> None:
        """Starts every node that does not run, without waiting for any."""
        cluster_id = self.cluster_id()
        for node in self.nodes:
            node.home.mkdir(parents=True, exist_ok=True)
            (node.home / "cluster.id").write_text(f"{cluster_id}\n")
            node.launch()

    def wait_ready(self, timeout: float = 120.0) -> None:
        for node in self.nodes:
            node.wait_ready(timeout)

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM every node at once, SIGKILL after `timeout`; False when none was running."""
        return stop_pids([node.pid_file for node in self.nodes], timeout) > 0


DevCluster = LocalCluster | ReplicatedCluster
_ALIASES = ("dc1", "dc2")


def nodes_running(home: Path) -> int:
    """How many nodes the replicated cluster under `home` was made with, when any of them runs; 0
    when none does (or `home` holds a single-node cluster)."""
    nodes = sorted(home.glob("node*"))
    return len(nodes) if any(running_pid(node / "kafka.pid") for node in nodes) else 0


def dev_clusters_of(brokers: int | None, root: Path | None = None,
                    ports: tuple[int, int] = DEV_PORTS) -> list[DevCluster]:
    """The dev clusters with `brokers` nodes each; None: in the shape they run in now (one node
    each when none runs)."""
    base = root or cache_dir() / "dev"
    if brokers is None:
        brokers = max(nodes_running(base / alias) for alias in _ALIASES) or 1
    if brokers == 1:
        return list(dev_clusters(root, ports))
    return [ReplicatedCluster(alias, port, base / alias, brokers) for alias, port in zip(_ALIASES, ports, strict=True)]
