"""spark-submit entry point for one flow: `spark-submit ... jobs/replicate.py --config FLOW.yaml`.

The flow file is found, in this order: at the path given; in the driver's working directory
under its base name (where YARN puts a file shipped with `--files` in cluster mode); through
`SparkFiles` (where Spark puts it on Kubernetes and in client mode). spark-submit.sh ships it
with `--files` whenever the driver runs elsewhere.
"""

import os
import sys

from dr_stream.cli import main


def _flow_file(given: str) -> str:
    if os.path.exists(given):
        return given
    name = os.path.basename(given)
    if os.path.exists(name):
        return name
    from pyspark import SparkFiles

    from dr_stream.runtime.session import spark_session

    spark_session()  # SparkFiles needs the context; the flow's run reuses it
    shipped = SparkFiles.get(name)
    return shipped if os.path.exists(shipped) else given  # else the config error names the path


def _with_flow_file(argv: list[str]) -> list[str]:
    if "--config" not in argv or argv.index("--config") + 1 >= len(argv):
        raise SystemExit("usage: replicate.py --config FLOW.yaml")
    i = argv.index("--config") + 1
    return [*argv[:i], _flow_file(argv[i]), *argv[i + 1:]]


if __name__ == "__main__":
    sys.exit(main(["run", *_with_flow_file(sys.argv[1:])]))
