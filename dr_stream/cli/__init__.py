"""`dr-stream` command line: local clusters, running a flow, translation, failover, status, setup."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
from typing import Any, NoReturn

from dr_stream import __version__
from dr_stream.core.config import ConfigError, load_flow
from dr_stream.exit_codes import ExitCode
from dr_stream.kafka.reachability import ClusterAccessError
from dr_stream.kafka.waits import WAITS
from dr_stream.log_format import writes_json
from dr_stream.operations.held_records import add_held_record_commands
from dr_stream.operations.report_commands import add_report_commands, spark_for, tables_of, to_stderr

JSON_HELP = "the result as JSON on stdout (progress lines on stderr)"


def _dev(args: argparse.Namespace) -> int:
    words = args.words
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

    return clusters_command(words[0], brokers=args.brokers)


def _run(args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from dr_stream.log_format import configure
    from dr_stream.operations.flow_tables import FlowTables
    from dr_stream.phase_clock import PhaseClock

    configure(args.log_format)
    config = load_flow(args.config)
    from dr_stream.replication.flow import ReplicationFlow
    from dr_stream.replication.supervisor import SparkStopped, run_until_stopped
    from dr_stream.runtime.session import spark_session

    clock = PhaseClock()
    # The offset index is read without a JVM while Spark starts: a restart waits for both. A
    # location the deltalake package cannot open fails this read, and the flow reads it through Spark.
    reader = ThreadPoolExecutor(1, thread_name_prefix="index-read")
    index = reader.submit(FlowTables.of(config).index.runs_and_positions)
    reader.shutdown(wait=False)
    spark = spark_session(f"dr-stream-{config.name}", ui_port=config.metrics.spark_ui_port, log_format=args.log_format)
    spark.sparkContext.setLogLevel("WARN")
    clock.mark("spark session")
    if spark.conf.get("spark.submit.deployMode", "client") == "cluster":
        from dr_stream.runtime.state_paths import require_shared

        require_shared(config)
    flow = ReplicationFlow(config, spark, clock=clock, index_prefetch=index)
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


def _positions(args: argparse.Namespace, commit: bool) -> int:
    from dr_stream.operations.failover import failover, translate_positions
    from dr_stream.operations.report import format_positions, json_document

    config = load_flow(args.config)
    tables = tables_of(config)
    if commit:
        positions = failover(config, tables, args.group, dry_run=args.dry_run, force=args.force, log=to_stderr)
    else:
        positions = translate_positions(config, tables, args.group, log=to_stderr)
    if args.json:
        print(json_document({"source_reachable": positions.source_reachable, "origin": positions.origin,
                             "positions": [p.as_dict() for p in positions.rows]}))
    else:
        print(format_positions(positions))
    failed = [p for p in positions.rows if p.action.failed]
    return ExitCode.FAILED if failed else ExitCode.OK


def _translate(args: argparse.Namespace) -> int:
    if args.offsets is not None:
        return _translate_offsets(args)
    args.group = re.escape(args.group)  # --group names one group here; failover takes a regex
    return _positions(args, commit=False)


def _translate_offsets(args: argparse.Namespace) -> int:
    from dr_stream.operations.application_offsets import OffsetsError, parse_offsets, translate_offsets
    from dr_stream.operations.report import json_document

    where = "offsets on stdin" if args.offsets == "-" else f"offsets in {args.offsets}"
    try:
        if args.offsets == "-":
            text = sys.stdin.read()
        else:
            with open(args.offsets) as given:
                text = given.read()
    except OSError as exc:
        print(f"dr-stream: translate: {where}: {exc.strerror}", file=sys.stderr)
        return ExitCode.USAGE
    config = load_flow(args.config)
    try:
        answer = translate_offsets(config, tables_of(config), parse_offsets(text, where), where, log=to_stderr)
    except OffsetsError as exc:
        print(f"dr-stream: translate: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if args.json:
        print(json_document({"source_reachable": answer.source_reachable, "origin": answer.origin,
                             "offsets": answer.document(), "positions": [p.as_dict() for p in answer.positions]}))
    else:
        print(json.dumps(answer.document()))
    for position in answer.inexact:
        print(f"dr-stream: translate: {position.line()}", file=sys.stderr)
    return ExitCode.ATTENTION if answer.inexact else ExitCode.OK


def _failover(args: argparse.Namespace) -> int:
    if args.spark_checkpoint is not None:
        return _failover_checkpoint(args)
    if args.undo:
        print("dr-stream: failover: --undo undoes a --spark-checkpoint move; a group's offsets are moved back by "
              "failback", file=sys.stderr)
        return ExitCode.USAGE
    return _positions(args, commit=True)


def _failover_checkpoint(args: argparse.Namespace) -> int:
    from dr_stream.operations.flow_tables import FlowTables
    from dr_stream.operations.report import format_checkpoint_move, json_document
    from dr_stream.operations.spark_checkpoint import CheckpointError, move_checkpoint, undo_move

    if args.group != ".*" or args.force:
        print("dr-stream: failover: --spark-checkpoint moves one query's checkpoint: --group and --force do not "
              "apply", file=sys.stderr)
        return ExitCode.USAGE
    config = load_flow(args.config)
    spark = spark_for(config)
    try:
        if args.undo:
            for line in undo_move(spark, args.spark_checkpoint):
                print(line)
            return ExitCode.OK
        move = move_checkpoint(config, FlowTables.of(config, lambda: spark, to_stderr), spark,
                               args.spark_checkpoint, dry_run=args.dry_run, log=to_stderr)
    except CheckpointError as exc:
        print(f"dr-stream: failover: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    print(json_document(move.as_dict()) if args.json else format_checkpoint_move(move))
    for position in move.inexact:
        print(f"dr-stream: failover: {position.line()}", file=sys.stderr)
    return ExitCode.ATTENTION if move.inexact else ExitCode.OK


def _failback(args: argparse.Namespace) -> int:
    from dr_stream.operations.failback import FailbackError, failback
    from dr_stream.operations.report import format_failback

    config = load_flow(args.config)
    spark = spark_for(config)
    # With --json, stdout carries only the report: progress lines go to stderr.
    progress_to = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    try:
        with progress_to:
            report = failback(config, spark, args.group, include_unreplicated=args.include_unreplicated,
                              restore=args.restore, force=args.force, timeout_s=args.timeout,
                              log=lambda line: print(line, flush=True), spark_checkpoints=args.spark_checkpoint)
    except FailbackError as exc:
        print(f"dr-stream: failback: {exc}", file=sys.stderr)
        return ExitCode.FAILED
    print(json.dumps(report.as_dict(), indent=2) if args.json else format_failback(report))
    failed = any(p.action.failed for p in report.positions.rows) or report.failed
    for move in report.checkpoints:
        for position in move.inexact:
            print(f"dr-stream: failback: {move.checkpoint}: {position.line()}", file=sys.stderr)
    inexact = any(move.inexact for move in report.checkpoints)
    return ExitCode.FAILED if failed else ExitCode.ATTENTION if inexact else ExitCode.OK


def _reset_flow(args: argparse.Namespace) -> int:
    from dr_stream.operations.reset_flow import reset_flow

    config = load_flow(args.config)
    for line in reset_flow(config, spark_for(config)):
        print(line)
    return ExitCode.OK


def _reset(args: argparse.Namespace) -> int:
    from dr_stream.operations.reset_offsets import parse_datetime, reset_to_datetime

    config = load_flow(args.config)
    clusters = {c.alias: c for c in (config.source, config.destination)}
    if args.cluster not in clusters:
        print(f"dr-stream: --cluster must be one of {', '.join(clusters)} (from {args.config})", file=sys.stderr)
        return ExitCode.USAGE
    try:
        at_ms = parse_datetime(args.to_datetime)
    except ValueError as exc:
        print(f"dr-stream: --to-datetime: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    actions = reset_to_datetime(config, args.cluster, args.group, args.topic, at_ms, dry_run=args.dry_run)
    if args.json:
        print(json.dumps([a.as_dict() for a in actions], indent=2))
    else:
        for a in actions:
            print(f"{a.group} {a.topic}[{a.partition}]: {a.current if a.current is not None else '-'} -> "
                  f"{a.offset}: {a.action.text}")
    return ExitCode.OK


def _setup(_: argparse.Namespace) -> int:
    from dr_stream.runtime.jvm import setup_jars

    setup_jars()
    return ExitCode.OK


def _check(args: argparse.Namespace) -> int:
    config = load_flow(args.config)
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


def _flow_commands(sub: argparse._SubParsersAction[Any]) -> None:
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



def _group_commands(sub: argparse._SubParsersAction[Any]) -> None:
    translate = sub.add_parser("translate", help="translated offsets of one group, or of offsets an application "
                                                 "kept itself, on the destination (no commit)")
    translate.add_argument("--config", required=True, help="the flow's YAML file")
    asked = translate.add_mutually_exclusive_group(required=True)
    asked.add_argument("--group", help="group id (exact)")
    asked.add_argument("--offsets", metavar="FILE|-",
                       help='source offsets in Spark\'s startingOffsets shape, {"topic": {"partition": offset}} '
                            "(- reads stdin); prints the destination's in the same shape, exit 0 when all are exact")
    translate.add_argument("--json", action="store_true", help=JSON_HELP)
    translate.set_defaults(func=_translate)

    fail = sub.add_parser("failover", help="commit translated offsets to the destination for matching groups")
    fail.add_argument("--config", required=True, help="the flow's YAML file")
    fail.add_argument("--group", default=".*", help="regex over group ids (whole name); default all")
    fail.add_argument("--dry-run", action="store_true", help="show what would be committed, commit nothing")
    fail.add_argument("--force", action="store_true", help="also rewind destination groups that are ahead")
    fail.add_argument("--spark-checkpoint", metavar="URI",
                      help="instead of groups, rewrite the Kafka offsets of this Spark Structured Streaming "
                           "checkpoint (local, hdfs://, s3a://) to the destination's; the originals are kept beside "
                           "them")
    fail.add_argument("--undo", action="store_true",
                      help="with --spark-checkpoint: put back the offsets files its last move replaced")
    fail.add_argument("--json", action="store_true", help=JSON_HELP)
    fail.set_defaults(func=_failover)

    back = sub.add_parser("failback", help="after a failover, bring data and groups back to the returning cluster; "
                                           "run with the flow from the cluster that took over to it")
    back.add_argument("--config", required=True, help="e.g. conf/dc2-to-dc1.yaml after dc1 failed")
    back.add_argument("--group", default=".*", help="regex over group ids to move back (whole name); default all")
    back.add_argument("--include-unreplicated", action="store_true",
                      help="copy records the returning cluster had but never replicated (they land out of order)")
    back.add_argument("--restore", action="store_true",
                      help="the returning cluster lost its data: restore it completely (its topics must be empty)")
    back.add_argument("--force", action="store_true", help="also rewind groups that are ahead on the returning cluster")
    back.add_argument("--timeout", type=float, default=None, help="give up when lag is not 0 after this many seconds")
    back.add_argument("--spark-checkpoint", metavar="URI", action="append", default=[],
                      help="also move this Spark Structured Streaming checkpoint's Kafka offsets back, once the copy "
                           "back is complete (repeatable)")
    back.add_argument("--json", action="store_true", help=JSON_HELP)
    back.set_defaults(func=_failback)



def _state_commands(sub: argparse._SubParsersAction[Any]) -> None:
    reset_state = sub.add_parser("reset-flow", help="move a flow's checkpoints, offset index and translations aside "
                                                    "(after its source was restored from scratch)")
    reset_state.add_argument("--config", required=True, help="the flow's YAML file")
    reset_state.set_defaults(func=_reset_flow)

    add_report_commands(sub)
    add_held_record_commands(sub)

    reset = sub.add_parser("reset-offsets", help="set a group to the first record at or after a datetime")
    reset.add_argument("--config", required=True, help="the flow's YAML file")
    reset.add_argument("--cluster", required=True, help="alias of the flow's source or destination")
    reset.add_argument("--group", required=True, help="group id (exact)")
    reset.add_argument("--to-datetime", required=True, help="ISO 8601; without a zone it is UTC")
    reset.add_argument("--topic", default=".*", help="regex over topic names (whole name); default all")
    reset.add_argument("--dry-run", action="store_true", help="show the offsets it would set, set nothing")
    reset.add_argument("--json", action="store_true", help=JSON_HELP)
    reset.set_defaults(func=_reset)

    setup = sub.add_parser("setup-jars", help="fetch the pinned JVM dependencies into .cache/jars")
    setup.set_defaults(func=_setup)


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on a bad command line, the number `status` and `drill` use for a verdict;
    this one exits `ExitCode.USAGE` (its subcommands' parsers are of the same class)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(ExitCode.USAGE, f"{self.prog}: error: {message}\n")


def parser() -> argparse.ArgumentParser:
    top = _Parser(prog="dr-stream", description="Kafka disaster-recovery replication on Spark")
    top.add_argument("--version", action="version", version=f"dr-stream {__version__}",
                     help="the version of dr-stream (CHANGELOG.md says what each one changed), and exit")
    sub = top.add_subparsers(dest="command", required=True)
    _flow_commands(sub)
    _group_commands(sub)
    _state_commands(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code = _command(args)
    finally:
        # What the command waited for while a cluster settled, once (`kafka.waits`); a flow says
        # its own through its log, as JSON lines when its log is JSON.
        for line in WAITS.lines():
            if writes_json():
                logging.getLogger("dr_stream.cli").info(f"{args.command}: {line}")
            else:
                print(f"dr-stream: {args.command}: {line}", file=sys.stderr)
    return code


def _command(args: argparse.Namespace) -> int:
    """The command's exit code; whatever it raises is one line on stderr, never a traceback."""
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"dr-stream: config error: {exc}", file=sys.stderr)
        return ExitCode.CONFIG
    except ClusterAccessError as exc:
        print(f"dr-stream: {exc}", file=sys.stderr)
        return ExitCode.UNREACHABLE
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except Exception as exc:
        from dr_stream.operations.command_failure import report

        failure = report(args.command, exc)
        print(failure.line, file=sys.stderr)
        return failure.code


if __name__ == "__main__":
    sys.exit(main())
