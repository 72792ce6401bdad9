"""`dr-stream` command line: local clusters, running a flow, setup."""

from __future__ import annotations

import argparse
import sys

from dr_stream.config import ConfigError, load_flow


def _dev(args: argparse.Namespace) -> int:
    from dr_stream.dev import dev_clusters

    clusters = dev_clusters()
    if args.action == "up":
        for cluster in clusters:
            print(f"{cluster.alias}: starting on {cluster.bootstrap} ...", flush=True)
            cluster.start()
        _print_status(clusters)
    elif args.action == "down":
        for cluster in clusters:
            stopped = cluster.stop()
            print(f"{cluster.alias}: {'stopped' if stopped else 'was not running'}")
    else:
        _print_status(clusters)
        return 0 if all(c.is_running() for c in clusters) else 1
    return 0


def _print_status(clusters) -> None:
    for cluster in clusters:
        state = f"running (pid {cluster.pid()})" if cluster.is_running() else "stopped"
        print(f"{cluster.alias}\t{cluster.bootstrap}\tcluster.id={cluster.cluster_id()}\t{state}")


def _run(args: argparse.Namespace) -> int:
    config = load_flow(args.config)
    from dr_stream.flow import ReplicationFlow, run_until_stopped
    from dr_stream.session import spark_session

    spark = spark_session(f"dr-stream-{config.name}")
    spark.sparkContext.setLogLevel("WARN")
    try:
        run_until_stopped(ReplicationFlow(config, spark))
    finally:
        try:
            spark.stop()
        except Exception:  # the JVM already exited with the signal; nothing left to stop
            pass
    return 0


def _setup(_: argparse.Namespace) -> int:
    from dr_stream.jvm import setup_jars

    setup_jars()
    return 0


def _check(args: argparse.Namespace) -> int:
    config = load_flow(args.config)
    print(f"{args.config}: ok (flow {config.name}: {config.source.alias} -> {config.destination.alias})")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="dr-stream", description="Kafka disaster-recovery replication on Spark")
    sub = top.add_subparsers(dest="command", required=True)

    dev = sub.add_parser("dev", help="local KRaft clusters dc1 (127.0.0.1:19092) and dc2 (127.0.0.1:29092)")
    dev.add_argument("action", choices=["up", "down", "status"])
    dev.set_defaults(func=_dev)

    run = sub.add_parser("run", help="run one flow in local Spark until SIGINT/SIGTERM")
    run.add_argument("--config", required=True, help="flow YAML (see README: Flow config)")
    run.set_defaults(func=_run)

    check = sub.add_parser("check-config", help="validate a flow YAML and exit")
    check.add_argument("--config", required=True)
    check.set_defaults(func=_check)

    setup = sub.add_parser("setup-jars", help="fetch the pinned JVM dependencies into .cache/jars")
    setup.set_defaults(func=_setup)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"dr-stream: config error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
