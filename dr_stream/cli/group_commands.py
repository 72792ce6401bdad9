"""The commands that move where consumers resume: `translate`, `failover`, `failback` and
`reset-offsets`."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from typing import Any

from dr_stream.cli.command_context import CommandContext, say
from dr_stream.exit_codes import ExitCode

JSON_HELP = "the result as JSON on stdout (progress lines on stderr)"


def _positions(ctx: CommandContext, group: str, commit: bool) -> ExitCode:
    from dr_stream.operations.failover import failover, translate_positions
    from dr_stream.operations.report import format_positions, json_document

    args = ctx.args
    if commit:
        positions = failover(ctx.config, ctx.tables, group, dry_run=args.dry_run, force=args.force, log=say)
    else:
        positions = translate_positions(ctx.config, ctx.tables, group, log=say)
    if args.json:
        print(json_document({"source_reachable": positions.source_reachable, "origin": positions.origin,
                             "positions": [p.as_dict() for p in positions.rows]}))
    else:
        print(format_positions(positions))
    failed = [p for p in positions.rows if p.action.failed]
    return ExitCode.FAILED if failed else ExitCode.OK


def _translate(ctx: CommandContext) -> ExitCode:
    if ctx.args.offsets is not None:
        return _translate_offsets(ctx)
    return _positions(ctx, re.escape(ctx.args.group), commit=False)  # one group here; failover takes a regex


def _translate_offsets(ctx: CommandContext) -> ExitCode:
    from dr_stream.operations.application_offsets import OffsetsError, parse_offsets, translate_offsets
    from dr_stream.operations.report import json_document

    args = ctx.args
    where = "offsets on stdin" if args.offsets == "-" else f"offsets in {args.offsets}"
    try:
        if args.offsets == "-":
            text = sys.stdin.read()
        else:
            with open(args.offsets) as given:
                text = given.read()
    except OSError as exc:
        return ctx.refused(f"{where}: {exc.strerror}")
    try:
        answer = translate_offsets(ctx.config, ctx.tables, parse_offsets(text, where), where, log=say)
    except OffsetsError as exc:
        return ctx.refused(str(exc))
    if args.json:
        print(json_document({"source_reachable": answer.source_reachable, "origin": answer.origin,
                             "offsets": answer.document(), "positions": [p.as_dict() for p in answer.positions]}))
    else:
        print(json.dumps(answer.document()))
    for position in answer.inexact:
        say(f"dr-stream: translate: {position.line()}")
    return ExitCode.ATTENTION if answer.inexact else ExitCode.OK


def _failover(ctx: CommandContext) -> ExitCode:
    if ctx.args.spark_checkpoint is not None:
        return _failover_checkpoint(ctx)
    if ctx.args.undo:
        return ctx.refused("--undo undoes a --spark-checkpoint move; a group's offsets are moved back by failback")
    return _positions(ctx, ctx.args.group, commit=True)


def _failover_checkpoint(ctx: CommandContext) -> ExitCode:
    from dr_stream.operations.report import format_checkpoint_move, json_document
    from dr_stream.operations.spark_checkpoint import CheckpointError, move_checkpoint, undo_move

    args = ctx.args
    if args.group != ".*" or args.force:
        return ctx.refused("--spark-checkpoint moves one query's checkpoint: --group and --force do not apply")
    try:
        if args.undo:
            for line in undo_move(ctx.spark, args.spark_checkpoint):
                print(line)
            return ExitCode.OK
        move = move_checkpoint(ctx.config, ctx.tables, ctx.spark, args.spark_checkpoint, dry_run=args.dry_run,
                               log=say)
    except CheckpointError as exc:
        return ctx.refused(str(exc))
    print(json_document(move.as_dict()) if args.json else format_checkpoint_move(move))
    for position in move.inexact:
        say(f"dr-stream: failover: {position.line()}")
    return ExitCode.ATTENTION if move.inexact else ExitCode.OK


def _failback(ctx: CommandContext) -> ExitCode:
    from dr_stream.operations.failback import FailbackError, failback
    from dr_stream.operations.report import format_failback

    args = ctx.args
    # With --json, stdout carries only the report: progress lines go to stderr.
    progress_to = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    try:
        with progress_to:
            report = failback(ctx.config, ctx.spark, args.group, include_unreplicated=args.include_unreplicated,
                              restore=args.restore, force=args.force, timeout_s=args.timeout,
                              log=lambda line: print(line, flush=True), spark_checkpoints=args.spark_checkpoint)
    except FailbackError as exc:
        print(f"dr-stream: failback: {exc}", file=sys.stderr)
        return ExitCode.FAILED
    print(json.dumps(report.as_dict(), indent=2) if args.json else format_failback(report))
    failed = any(p.action.failed for p in report.positions.rows) or report.failed
    for move in report.checkpoints:
        for position in move.inexact:
            say(f"dr-stream: failback: {move.checkpoint}: {position.line()}")
    inexact = any(move.inexact for move in report.checkpoints)
    return ExitCode.FAILED if failed else ExitCode.ATTENTION if inexact else ExitCode.OK


def _reset(ctx: CommandContext) -> ExitCode:
    from dr_stream.operations.reset_offsets import parse_datetime, reset_to_datetime

    args, config = ctx.args, ctx.config
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


def add_group_commands(sub: argparse._SubParsersAction[Any]) -> None:
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


def add_offsets_commands(sub: argparse._SubParsersAction[Any]) -> None:
    reset = sub.add_parser("reset-offsets", help="set a group to the first record at or after a datetime")
    reset.add_argument("--config", required=True, help="the flow's YAML file")
    reset.add_argument("--cluster", required=True, help="alias of the flow's source or destination")
    reset.add_argument("--group", required=True, help="group id (exact)")
    reset.add_argument("--to-datetime", required=True, help="ISO 8601; without a zone it is UTC")
    reset.add_argument("--topic", default=".*", help="regex over topic names (whole name); default all")
    reset.add_argument("--dry-run", action="store_true", help="show the offsets it would set, set nothing")
    reset.add_argument("--json", action="store_true", help=JSON_HELP)
    reset.set_defaults(func=_reset)
