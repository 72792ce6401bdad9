"""`dr-stream reset-flow`: start a flow afresh after its source was restored from scratch.

The flow's checkpoints, offset index and translations describe the source's old offsets; they
are moved aside (renamed `<name>.before-<time>`, never deleted) and the flow's left-out marks
are dropped, so its next run copies the restored topics from their start. The state may be on
HDFS or object storage, so it is moved with Hadoop's FileSystem (`state_paths`).
"""

from __future__ import annotations

import time

from pyspark.sql import SparkSession

from dr_stream.core.config import FlowConfig
from dr_stream.core.contracts import left_out_group
from dr_stream.kafka.cluster_context import FlowClusters
from dr_stream.replication.left_out import forget_left_out
from dr_stream.runtime.state_paths import move_aside


def reset_flow(config: FlowConfig, spark: SparkSession) -> list[str]:
    """Moves the flow's state aside and drops its left-out marks; one line per thing done."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    done = []
    for path in (config.streaming.checkpoint_dir, config.streaming.offset_index, config.streaming.translations):
        target = move_aside(spark, path, f"before-{stamp}")
        if target:
            done.append(f"moved {path} -> {target}")
    with FlowClusters.of(config, lambda: spark) as clusters:
        destination_id = clusters.destination.cluster_id()
        if forget_left_out(clusters.source.admin, destination_id):
            done.append(f"deleted group {left_out_group(destination_id)} on {config.source.alias}")
    return done or ["nothing to reset"]
