"""The commands that run a flow or make ready for one: `dev`, `run`, `check-config`, `adopt`,
`reset-flow` and `setup-jars`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from dr_stream.cli.command_context import CommandContext
from dr_stream.exit_codes import ExitCode


def _dev(ctx: CommandContext) -> int:
    words = ctx.args.words
    if words[:1] == ["yarn"] and len(words) == 2 and words[1] in ("up", "down", "status"):
        from dr_stream.dev.hadoop_commands import yarn_command

        return yarn_command(words[1])
    if words[:1] == ["k8s"] and len(words) == 2 and words[1] in ("up", "down", "status"):
        from dr_stream.dev.kube_commands import kube_command

        return kube_command(words[1])
    if len(words) != 1 or words[0] not in ("up", "down", "status"):
        print("dr-stream dev: expected up | down | status, or yarn | k8s up | down | status", file=sys.stderr)
        return ExitCode.USAGE
    from dr_stream.dev.cluster_commands import clusters_command

    return clusters_command(words[0], brokers=ctx.args.brokers)


def _run(ctx: CommandContext) -> ExitCode:
    from concurrent.futures import ThreadPoolExecutor

    from dr_stream.log_format import configure
    from dr_stream.operations.flow_tables import FlowTables
    from dr_stream.phase_clock import PhaseClock

    args = ctx.args
    configure(args.log_format)
    config = ctx.config
    from dr_stream.replication.flow import build_flow
    from dr_stream.replication.supervisor import SparkStopped, run_until_stopped
    from dr_stream.runtime.session import spark_session

    clock = PhaseClock()
    # The offset index is read without a JVM while Spark starts: a restart waits for both. A
    # location the deltalake package cannot open fails this read, and the flow reads it through Spark.
    reader = ThreadPoolExecutor(1, thread_name_prefix="index-read")
    index = reader.submit(FlowTables.of(config).index.runs_and_positions)
    reader.shutdown(wait=False)
    # A flow's session is the streaming application's own, not a command's (`CommandContext.spark`).
    spark = spark_session(f"dr-stream-{config.name}", ui_port=config.metrics.spark_ui_port, log_format=args.log_format)
    spark.sparkContext.setLogLevel("WARN")
    clock.mark("spark session")
    if spark.conf.get("spark.submit.deployMode", "client") == "cluster":
        from dr_stream.runtime.state_paths import require_shared

        require_shared(config)
    flow = build_flow(config, spark, clock=clock, index_prefetch=index)
    also = []
    if config.drill.interval_s is not None:
        from dr_stream.operations.drill_schedule import DrillSchedule

        also.append(("drill", DrillSchedule(config, flow.metrics, lambda: spark, flow.log).run))
    try:
        run_until_stopped(flow, metrics_port=args.metrics_port, also=also)
    except SparkStopped:
        return ExitCode.FAILED  # the flow said why
    finally:
        try:
            spark.stop()
        except Exception:  # the JVM already exited with the signal; nothing left to stop
            pass
    return ExitCode.OK


def _check(ctx: CommandContext) -> ExitCode:
    args, config = ctx.args, ctx.config
    if args.deploy_mode == "cluster":
        from dr_stream.runtime.state_paths import require_shared

        require_shared(config)
    print(f"{args.config}: ok (flow {config.name}: {config.source.alias} -> {config.destination.alias})", flush=True)
    if not args.connect:
        return ExitCode.OK
    from dr_stream.kafka.reachability import check_clusters

    results = check_clusters([config.source, config.destination])
    for _, line in results:
        print(line)
    return ExitCode.OK if all(ok for ok, _ in results) else ExitCode.UNREACHABLE


def _reset_flow(ctx: CommandContext) -> ExitCode:
    from dr_stream.operations.reset_flow import reset_flow

    for line in reset_flow(ctx.config, ctx.spark):
        print(line)
    return ExitCode.OK


def _adopt(ctx: CommandContext) -> ExitCode:
    import json

    from dr_stream.operations.adopt import AdoptRefused, adopt

    args = ctx.args
    say = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else print
    try:
        adoption = adopt(ctx.config, ctx.spark, args.from_, dry_run=args.dry_run, say=say)
    except AdoptRefused as exc:
        print(f"dr-stream: adopt: {exc}", file=sys.stderr)
        return ExitCode.FAILED
    if args.json:
        print(json.dumps(adoption.as_dict(), indent=2))
    # Copies left unpaired are no error, but someone should look before the groups move.
    return ExitCode.OK if adoption.exact else ExitCode.ATTENTION


def _setup(_: CommandContext) -> ExitCode:
    from dr_stream.runtime.jvm import setup_jars

    setup_jars()
    return ExitCode.OK


def add_flow_commands(sub: argparse._SubParsersAction[Any]) -> None:
    dev = sub.add_parser("dev", help="local KRaft clusters dc1 (127.0.0.1:19092) and dc2 (127.0.0.1:29092); "
                                     "`dev yarn ...`: a local HDFS and YARN (NameNode on 19800); "
                                     "`dev k8s ...`: a single-node Kubernetes (API server on 16443)")
    dev.add_argument("words", nargs="+", metavar="[yarn|k8s] {up,down,status}",
                     help="up, down or status of the local clusters; yarn up | down | status: of the local HDFS "
                          "and YARN; k8s up | down | status: of the local Kubernetes (built once, then cached)")
    dev.add_argument("--brokers", type=int, default=None, metavar="N",
                     help="KRaft nodes per cluster for `up` (default 1; 3: replication factor 3, "
                          "min.insync.replicas 2, node 1 on the usual bootstrap port); down and status "
                          "follow the shape that runs")
    dev.set_defaults(func=_dev)

    run = sub.add_parser("run", help="run one flow in local Spark until SIGINT/SIGTERM")
    run.add_argument("--config", required=True, help="flow YAML (docs/configuration.md)")
    run.add_argument("--metrics-port", type=int, default=None,
                     help="serve /metrics (Prometheus) and /healthz on this port (overrides metrics.port)")
    run.add_argument("--log-format", choices=["text", "json"], default=os.environ.get("DR_STREAM_LOG_FORMAT", "text"),
                     help="json: one JSON object per line, from dr-stream and from Spark (default: "
                          "$DR_STREAM_LOG_FORMAT or text)")
    run.set_defaults(func=_run)

    check = sub.add_parser("check-config", help="validate a flow YAML and exit")
    check.add_argument("--config", required=True, help="the flow's YAML file")
    check.add_argument("--connect", action="store_true",
                       help="also connect to both clusters with dr-stream's clients and Spark's Java clients")
    check.add_argument("--deploy-mode", choices=["client", "cluster"], default="client",
                       help="cluster: also refuse state paths a driver on another node could not reach")
    check.set_defaults(func=_check)


def add_state_commands(sub: argparse._SubParsersAction[Any]) -> None:
    reset_state = sub.add_parser("reset-flow", help="move a flow's checkpoints, offset index and translations aside "
                                                    "(after its source was restored from scratch)")
    reset_state.add_argument("--config", required=True, help="the flow's YAML file")
    reset_state.set_defaults(func=_reset_flow)

    adopt = sub.add_parser("adopt", help="once, before a flow's first run: index what MirrorMaker 2 or Replicator "
                                         "already copied, take over the groups it synced, and resume copying "
                                         "after it (stop the other replicator first)")
    adopt.add_argument("--config", required=True, help="the flow's YAML file; topics.rename must give the names the "
                                                      "other replicator wrote (MirrorMaker 2: \"<alias>.${topic}\")")
    adopt.add_argument("--from", dest="from_", choices=["mirrormaker2", "replicator"], default="mirrormaker2",
                       help="the replicator that made the copies (default mirrormaker2)")
    adopt.add_argument("--dry-run", action="store_true", help="pair the copies and say what would be adopted; "
                                                             "write nothing, move no group")
    adopt.add_argument("--json", action="store_true", help="the result per partition and group as JSON on stdout "
                                                          "(progress lines go to stderr)")
    adopt.set_defaults(func=_adopt)


def add_setup_commands(sub: argparse._SubParsersAction[Any]) -> None:
    setup = sub.add_parser("setup-jars", help="fetch the pinned JVM dependencies into .cache/jars")
    setup.set_defaults(func=_setup)
