"""`dr-stream reset-flow`: start a flow afresh after its source was restored from scratch.

The flow's checkpoints, offset index and translations describe the source's old offsets; they
are moved aside (renamed `<name>.before-<time>`, never deleted) and the flow's left-out marks
are dropped, so its next run copies the restored topics from their start.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from dr_stream.config import FlowConfig
from dr_stream.kafka import clients
from dr_stream.kafka.reachability import require_cluster_id
from dr_stream.replication.left_out import forget_left_out, left_out_group


def reset_flow(config: FlowConfig) -> list[str]:
    """Moves the flow's state aside and drops its left-out marks; one line per thing done."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    done = []
    for path in (config.streaming.checkpoint_dir, config.streaming.offset_index, config.streaming.translations):
        p = Path(path)
        if p.exists():
            target = p.with_name(f"{p.name}.before-{stamp}")
            shutil.move(str(p), str(target))
            done.append(f"moved {p} -> {target}")
    destination_id = require_cluster_id(config.destination)
    if forget_left_out(clients.admin(config.source), destination_id):
        done.append(f"deleted group {left_out_group(destination_id)} on {config.source.alias}")
    return done or ["nothing to reset"]
