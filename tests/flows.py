"""Flows between the test clusters: their configs, their YAML files, and running them in this process."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from dr_stream.core.config import FlowConfig, parse_flow
from dr_stream.dev.clusters import LocalCluster
from dr_stream.dev.replicated_cluster import ReplicatedCluster


def flow_config(source: LocalCluster | ReplicatedCluster, destination: LocalCluster | ReplicatedCluster, work: Path,
                name: str | None = None, **sections) -> FlowConfig:
    """A flow between two test clusters; `name` must differ from any flow running at the same time
    (Spark query names are unique within the session)."""
    raw = {
        "source": {"alias": source.alias, "bootstrap_servers": _reached_through(source)},
        "destination": {"alias": destination.alias, "bootstrap_servers": _reached_through(destination)},
        "streaming": {
            "checkpoint_dir": str(work / f"{source.alias}-to-{destination.alias}" / "checkpoints"),
            "offset_index": str(work / f"{source.alias}-to-{destination.alias}" / "offset-index"),
            "trigger": "500ms",
        },
    }
    if name:
        raw["name"] = name
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value}
    return parse_flow(raw, "<test>")


def _reached_through(cluster) -> str:
    """Every node of a replicated cluster (`dev up --brokers 3`), as production flow files list
    them, so the flow's new clients reach it with any one node down; a single node's address."""
    return getattr(cluster, "all_bootstraps", cluster.bootstrap)


def flow_file(config: FlowConfig, directory: Path, **sections) -> str:
    """The flow as a YAML file, for the command line and the notebook."""
    import yaml

    c = config
    path = directory / "flow.yaml"
    path.write_text(yaml.safe_dump({
        "name": c.name,
        "source": {"alias": c.source.alias, "bootstrap_servers": c.source.bootstrap_servers},
        "destination": {"alias": c.destination.alias, "bootstrap_servers": c.destination.bootstrap_servers},
        "streaming": {"checkpoint_dir": c.streaming.checkpoint_dir, "offset_index": c.streaming.offset_index,
                      "translations": c.streaming.translations, "losses": c.streaming.losses},
        **sections,
    }))
    return str(path)


def one_topic_flow_file(directory: Path, name: str, source: str, destination: str, topic: str, **streaming) -> Path:
    """A dc1 -> dc2 flow of one topic as a YAML file with its state under `directory`, for
    tests that run it as its own process."""
    import yaml

    path = directory / "flow.yaml"
    path.write_text(yaml.safe_dump({
        "name": name,
        "source": {"alias": "dc1", "bootstrap_servers": source},
        "destination": {"alias": "dc2", "bootstrap_servers": destination},
        "topics": {"include": [topic.replace(".", "\\.")]},
        "streaming": {"checkpoint_dir": str(directory / "checkpoints"), "offset_index": str(directory / "index"),
                      **streaming},
    }))
    return path


@contextmanager
def running_flow(spark, config: FlowConfig, log: Callable[[str], None] | None = None):
    """Runs a flow's replication query in this process until the block ends (its lines to `log`
    when given)."""
    from dr_stream.replication.flow import build_flow
    from dr_stream.replication.supervisor import running_in_background

    flow = build_flow(config, spark, log=log)
    with running_in_background(flow):
        yield flow
