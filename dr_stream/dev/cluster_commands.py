"""`dr-stream dev up | down | status`: the local Kafka clusters, for people (presentation only)."""

from __future__ import annotations

from collections.abc import Sequence

from dr_stream.dev.clusters import LocalCluster, dev_clusters


def _print_status(clusters: Sequence[LocalCluster]) -> None:
    for cluster in clusters:
        state = f"running (pid {cluster.pid()})" if cluster.is_running() else "stopped"
        print(f"{cluster.alias}\t{cluster.bootstrap}\tcluster.id={cluster.cluster_id()}\t{state}")


def clusters_command(action: str, clusters: Sequence[LocalCluster] | None = None) -> int:
    clusters = dev_clusters() if clusters is None else clusters
    if action == "up":
        for cluster in clusters:
            print(f"{cluster.alias}: starting on {cluster.bootstrap} ...", flush=True)
            cluster.start()
        _print_status(clusters)
    elif action == "down":
        for cluster in clusters:
            stopped = cluster.stop()
            print(f"{cluster.alias}: {'stopped' if stopped else 'was not running'}")
    else:
        _print_status(clusters)
        return 0 if all(c.is_running() for c in clusters) else 1
    return 0
