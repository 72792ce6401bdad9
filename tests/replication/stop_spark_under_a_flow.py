"""Runs a flow in this process's local Spark, and once the file `<config>.stop-spark` appears,
stops its SparkContext from the JVM's side, as the JVM's shutdown hook does when spark-submit's
JVM is signalled (the Python side is not told). Exits 3 when the flow ends with SparkStopped.

Usage: python -m tests.replication.stop_spark_under_a_flow FLOW.yaml
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from dr_stream.core.config import load_flow
from dr_stream.replication.flow import build_flow
from dr_stream.replication.supervisor import SparkStopped, run_until_stopped
from dr_stream.runtime.session import spark_session


def main(path: str) -> int:
    spark = spark_session("dr-stream-stop-under", master="local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    marker = Path(path + ".stop-spark")
    stop = threading.Event()

    def stop_spark_when_told() -> None:
        while not marker.exists() and not stop.wait(0.2):
            pass
        if marker.exists():
            spark.sparkContext._jsc.sc().stop()

    threading.Thread(target=stop_spark_when_told, daemon=True).start()
    try:
        run_until_stopped(build_flow(load_flow(path), spark), stop)
    except SparkStopped:
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
