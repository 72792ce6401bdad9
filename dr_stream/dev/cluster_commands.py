"""`dr-stream dev up | down | status [--brokers N]`: the local Kafka clusters, for people
(presentation only)."""

from __future__ import annotations

from collections.abc import Sequence

from dr_stream.dev.replicated_cluster import DevCluster, ReplicatedCluster, dev_clusters_of
from dr_stream.exit_codes import ExitCode


def _state(cluster: DevCluster) -> str:
    if isinstance(cluster, ReplicatedCluster):
        up = [node for node in cluster.nodes if node.is_running()]
        running = f"{len(up)} of {cluster.brokers} nodes running" if up else "stopped"
        return f"{running}\tbrokers={cluster.all_bootstraps}"
    return f"running (pid {cluster.pid()})" if cluster.is_running() else "stopped"


def _print_status(clusters: Sequence[DevCluster]) -> None:
    for cluster in clusters:
        print(f"{cluster.alias}\t{cluster.bootstrap}\tcluster.id={cluster.cluster_id()}\t{_state(cluster)}")


def _other_shape_running(wanted: Sequence[DevCluster]) -> str | None:
    """Why `up` in the wanted shape cannot start: the clusters run in another one on its ports
    (`dev_clusters_of(None)` is replicated only when some node of it runs)."""
    for now, want in zip(dev_clusters_of(None), wanted, strict=True):
        has = now.brokers if isinstance(now, ReplicatedCluster) else 1
        asked = want.brokers if isinstance(want, ReplicatedCluster) else 1
        if has != asked and (isinstance(now, ReplicatedCluster) or now.is_running()):
            return (f"{now.alias} runs with {has} broker{'s' if has > 1 else ''}, not {asked}: "
                    "`dr-stream dev down` first (its data stays)")
    return None


def clusters_command(action: str, clusters: Sequence[DevCluster] | None = None, brokers: int | None = None) -> int:
    if clusters is None:
        clusters = dev_clusters_of(brokers)
        blocked = _other_shape_running(clusters) if action == "up" else None
        if blocked:
            print(f"dr-stream dev up: {blocked}")
            return ExitCode.USAGE
    if action == "up":
        for cluster in clusters:
            nodes = f" ({cluster.brokers} KRaft nodes: {cluster.all_bootstraps})" \
                if isinstance(cluster, ReplicatedCluster) else ""
            print(f"{cluster.alias}: starting on {cluster.bootstrap}{nodes} ...", flush=True)
            cluster.start()
        _print_status(clusters)
    elif action == "down":
        for cluster in clusters:
            stopped = cluster.stop()
            print(f"{cluster.alias}: {'stopped' if stopped else 'was not running'}")
    else:
        _print_status(clusters)
        return ExitCode.OK if all(c.is_running() for c in clusters) else ExitCode.FAILED
    return 0
