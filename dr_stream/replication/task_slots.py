"""How many tasks a Spark application can run at once, and how many real-time mode needs.

In real-time mode every source partition is read by its own task for the whole length of a
batch. A partition whose task finds no free slot waits for the batch to end
before any of its records move (5 minutes by default), so the flow refuses to start without enough slots rather
than run with some partitions silently late. One slot more than the partitions is kept for
the short Spark jobs that run beside the query: the translate query's micro-batches, the
offset-index and translation-log writes, the gap scan at start.
"""

from __future__ import annotations

import multiprocessing
import re

from dr_stream.core.config import ConfigError

_LOCAL = re.compile(r"^local(?:\[(\*|\d+)(?:\s*,\s*\d+)?\])?$")
_LOCAL_CLUSTER = re.compile(r"^local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]$")


def slots_needed(partitions: int) -> int:
    """One task per source partition plus one for the translate query and the driver's own jobs."""
    return partitions + 1


def task_slots(conf: dict[str, str], host_cores: int) -> int:
    """Concurrent tasks the application's conf allows (`host_cores` resolves `local[*]`).

    A cluster manager's application counts its executors: `spark.executor.instances` (the
    maximum with dynamic allocation, the most it can grow to) times the cores per executor, over
    `spark.task.cpus`; Spark's defaults where a key is unset (2 executors of 1 core)."""
    master = conf.get("spark.master", "local[*]").strip()
    task_cpus = max(1, int(conf.get("spark.task.cpus", "1")))
    local = _LOCAL.match(master)
    if local:
        threads = local.group(1)
        cores = 1 if threads is None else host_cores if threads == "*" else int(threads)
        return cores // task_cpus
    cluster = _LOCAL_CLUSTER.match(master)
    if cluster:
        return int(cluster.group(1)) * int(cluster.group(2)) // task_cpus
    dynamic = conf.get("spark.dynamicAllocation.enabled", "false").lower() == "true"
    executors = int(conf.get("spark.dynamicAllocation.maxExecutors" if dynamic else "spark.executor.instances",
                             conf.get("spark.executor.instances", "2")))
    cores = int(conf.get("spark.executor.cores", "1"))
    return executors * cores // task_cpus


def shortfall(partitions: int, slots: int, master: str) -> str | None:
    """The refusal line, or None when the application has the slots real-time mode needs."""
    needed = slots_needed(partitions)
    if slots >= needed:
        return None
    return (f"streaming.mode realtime needs {needed} task slots ({partitions} source partitions, one "
            f"long-running task each, plus one for the translate query and the offset index) and this "
            f"application has {slots} "
            f"(master {master}); give it more (local[{needed}], or more executors/executor cores) or "
            "use streaming.mode: microbatch")


def require_slots(conf: dict[str, str], partitions: int, path: str) -> str:
    """The line that says how many slots real-time mode uses; a ConfigError naming the flow file
    when the application has too few."""
    slots = task_slots(conf, multiprocessing.cpu_count())
    refusal = shortfall(partitions, slots, conf.get("spark.master", "?"))
    if refusal:
        raise ConfigError(f"{path}: {refusal}")
    return f"realtime mode: {partitions} source partitions, {slots_needed(partitions)} of {slots} task slots in use"
