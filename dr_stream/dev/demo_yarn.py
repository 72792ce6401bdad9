"""`make demo-yarn`: one flow in yarn-cluster mode on the local YARN, its state on the local HDFS.

Starts dc1, dc2 and the local HDFS + YARN (unless already up), writes `demo.yarn` in dc1,
submits conf/dc1-to-dc2.yaml through ./spark-submit.sh with every state path moved to HDFS,
prints the copy's progress, then reads the flow's lag back from HDFS with `dr-stream status`,
and finally kills the application through the ResourceManager. Stops only what it started.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import yaml

from dr_stream.dev.clusters import dev_clusters
from dr_stream.dev.hadoop import dev_hadoop
from dr_stream.kafka import clients
from dr_stream.kafka.admin import create_topic, delete_topics, log_bounds
from dr_stream.runtime.paths import cache_dir, project_root

if TYPE_CHECKING:
    from dr_stream.dev.clusters import LocalCluster


TOPIC, PARTITIONS, RECORDS = "demo.yarn", 3, 20_000


def _copied(cluster: LocalCluster) -> int:
    """Records of `demo.yarn` on the cluster (0 before the flow has created it)."""
    bounds = log_bounds(clients.admin(cluster.config), [(TOPIC, p) for p in range(PARTITIONS)])
    return sum(high - low for low, high in bounds.values())


def _fresh_topic(clusters: list[LocalCluster]) -> None:
    """`demo.yarn` empty on both clusters (an earlier run's records would make the count meaningless),
    then created on the source."""
    for cluster in clusters:
        delete_topics(clients.admin(cluster.config), [TOPIC])
    create_topic(clients.admin(clusters[0].config), TOPIC, PARTITIONS)


def _produce(cluster: LocalCluster) -> None:
    with clients.producing(cluster.config, {"linger.ms": 20}) as producer:
        for i in range(RECORDS):
            producer.produce(TOPIC, value=f"record {i}".encode(), partition=i % PARTITIONS)
            if i % 2000 == 0:
                producer.poll(0)


def _flow_file(fs_uri: str) -> str:
    flow = yaml.safe_load((project_root() / "conf" / "dc1-to-dc2.yaml").read_text())
    state = f"{fs_uri}/dr-stream/{flow['name']}"
    flow["topics"]["include"] = [re.escape(TOPIC)]
    flow["streaming"].update(checkpoint_dir=f"{state}/checkpoints", offset_index=f"{state}/offset-index")
    path = cache_dir() / "dev" / "yarn" / "dc1-to-dc2-on-yarn.yaml"
    path.write_text(yaml.safe_dump(flow, sort_keys=False))
    return str(path)


def main() -> int:
    clusters, hadoop = dev_clusters(), dev_hadoop()
    started = [c for c in clusters if not c.is_running()]
    hadoop_started = not hadoop.is_running()
    for cluster in clusters:
        cluster.start()
    print(f"hadoop: starting HDFS and YARN under {hadoop.home} ...", flush=True)
    began = time.monotonic()
    hadoop.start()
    print(f"hadoop: ready in {time.monotonic() - began:.1f}s; HADOOP_CONF_DIR={hadoop.conf_dir}", flush=True)
    source, destination = clusters
    _fresh_topic(clusters)
    _produce(source)
    flow = _flow_file(hadoop.fs_uri)
    env = {**os.environ, "HADOOP_CONF_DIR": str(hadoop.conf_dir)}
    print(f"submitting {flow} to YARN in cluster mode ...", flush=True)
    began = time.monotonic()
    submitted = subprocess.run(
        [str(project_root() / "spark-submit.sh"), flow, "--master", "yarn", "--deploy-mode", "cluster",
         "--conf", "spark.yarn.submit.waitAppCompletion=false",
         "--driver-memory", "1g", "--executor-memory", "1g", "--num-executors", "1"],
        env=env, capture_output=True, text=True)
    app = re.search(r"application_\d+_\d+", submitted.stderr)
    if submitted.returncode != 0 or not app:
        print(submitted.stderr[-3000:], file=sys.stderr)
        return 1
    print(f"{app.group(0)} submitted in {time.monotonic() - began:.1f}s; the driver runs in a YARN container")
    status = 1
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            copied = _copied(destination)
            print(f"  {time.monotonic() - began:5.1f}s  {TOPIC} on dc2: {copied}/{RECORDS}", flush=True)
            if copied >= RECORDS:
                status = 0
                break
            time.sleep(3)
        print("the flow's lag, read from its state on HDFS (dr-stream status) once its index has caught up:",
              flush=True)
        for _ in range(4):  # the offset index follows the copy by a few seconds
            shown = subprocess.run([str(project_root() / ".venv" / "bin" / "dr-stream"), "status", "--config", flow,
                                    "--max-lag-records", "0"], env=env, capture_output=True, text=True)
            if shown.returncode != 2:
                break
            time.sleep(5)
        print(shown.stdout, end="")
    finally:
        hadoop.kill_application(app.group(0))
        print(f"{app.group(0)}: killed")
        if hadoop_started:
            hadoop.stop()
        for cluster in started:
            cluster.stop()
    return status


if __name__ == "__main__":
    sys.exit(main())
