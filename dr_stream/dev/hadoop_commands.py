"""`dr-stream dev yarn up | down | status`: the local HDFS and YARN, for people (presentation only)."""

from __future__ import annotations

import time

from dr_stream.dev.hadoop import LocalHadoop, dev_hadoop


def _print_status(hadoop: LocalHadoop) -> None:
    print(f"hdfs\t{hadoop.fs_uri}\trunning (pid {hadoop.pid()})")
    print(f"yarn\t{hadoop.resourcemanager_web}\t{hadoop.memory_mb} MiB, {hadoop.vcores} vcores")
    print(f"export HADOOP_CONF_DIR={hadoop.conf_dir}")
    for app in hadoop.applications():
        print(f"  {app['id']}\t{app['name']}\t{app['state']}\t{app.get('finalStatus', '')}")


def yarn_command(action: str, hadoop: LocalHadoop | None = None) -> int:
    hadoop = hadoop or dev_hadoop()
    if action == "up":
        began = time.monotonic()
        print(f"hadoop: starting HDFS (NameNode on {hadoop.namenode_port}) and YARN under {hadoop.home} ...",
              flush=True)
        hadoop.start()
        print(f"hadoop: ready in {time.monotonic() - began:.1f}s")
        _print_status(hadoop)
    elif action == "down":
        print(f"hadoop: {'stopped' if hadoop.stop() else 'was not running'}")
    else:
        if not hadoop.is_running():
            print("hadoop: stopped")
            return 1
        _print_status(hadoop)
    return 0
