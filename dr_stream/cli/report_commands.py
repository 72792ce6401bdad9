"""The commands that report on a flow and change nothing: `status`, `drill` and `losses`.

Each reads the flow's tables without a JVM where it can (`CommandContext.tables`), prints a table or JSON
on stdout and its findings one per line on stderr, and exits 0 when all is well, 2 when a limit
is passed or a loss is on record, 3 when a cluster does not answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from dr_stream.cli.command_context import CommandContext, say
from dr_stream.core.config_def import DURATION, milliseconds
from dr_stream.exit_codes import ExitCode
from dr_stream.kafka.cluster_context import ClusterContext

if TYPE_CHECKING:
    from dr_stream.core.config import FlowConfig


def _status(ctx: CommandContext) -> ExitCode:
    from dr_stream.operations.report import format_status, json_document
    from dr_stream.operations.status import (
        Thresholds,
        over_thresholds,
        replication_lag,
        source_commits,
        translation_ages,
    )

    args, config = ctx.args, ctx.config
    if args.plot:
        return _plot(config, args.plot, args.since)
    with ctx.clusters() as clusters:
        down = clusters.unreachable()
        tables = ctx.tables
        lags = replication_lag(config, tables, clusters, source_up=config.source.alias not in down,
                               destination_up=config.destination.alias not in down)
        ages = translation_ages(tables)
        limits = Thresholds(args.max_lag_records, args.max_lag_seconds, args.max_translation_age)
        judged = limits.max_translation_age is not None and config.source.alias not in down
        over = over_thresholds(lags, ages, limits, source_commits(config, clusters) if judged else None)
    held = sorted(tables.holding().held.values(), key=lambda h: h.key)
    if args.json:
        print(json_document({"replication": [asdict(g) for g in lags], "translations": [asdict(a) for a in ages],
                             "unreachable": down, "over_thresholds": over, "held": [h.as_dict() for h in held]}))
    else:
        print(format_status(lags, ages))
    for alias in down:
        print(f"dr-stream: status: {alias} does not answer", file=sys.stderr)
    for line in over:
        print(f"dr-stream: status: {line}", file=sys.stderr)
    for hold in held:
        print(f"dr-stream: status: HELD {hold.line()} (dr-stream skip --config {args.config} --topic {hold.topic} "
              f"--partition {hold.partition} --offset {hold.offset})", file=sys.stderr)
    return ExitCode.UNREACHABLE if down else ExitCode.ATTENTION if over or held else ExitCode.OK


def _drill(ctx: CommandContext) -> ExitCode:
    from dataclasses import replace

    from dr_stream.operations.drill import drill
    from dr_stream.operations.report import format_drill

    args, config = ctx.args, ctx.config
    since = None
    if args.losses_since is not None:
        if not DURATION.match(args.losses_since):
            print(f"dr-stream: --losses-since: {args.losses_since!r} is not a duration like 12h or 7d", file=sys.stderr)
            return ExitCode.USAGE
        since = milliseconds(args.losses_since) / 1000
    overrides: dict[str, Any] = {k: v for k, v in (("rpo_s", args.rpo_seconds),
                                                   ("max_translation_age_s", args.max_translation_age),
                                                   ("losses_since_s", since)) if v is not None}
    limits = replace(config.drill, **overrides)
    verdict = drill(config, ctx.tables, limits, log=say)
    print(json.dumps(verdict.as_dict(), indent=2) if args.json else format_drill(verdict))
    for check in verdict.failures:
        print(f"dr-stream: drill: {check.line()}", file=sys.stderr)
    if verdict.ready:
        return ExitCode.OK
    return ExitCode.UNREACHABLE if any(c.area == "clusters" for c in verdict.failures) else ExitCode.ATTENTION


def _losses(ctx: CommandContext) -> ExitCode:
    args, config = ctx.args, ctx.config
    ledger = ctx.tables.losses
    losses = ledger.read()
    if args.json:
        print(json.dumps({"losses": [x.as_dict() for x in losses]}, indent=2))
    else:
        for loss in losses:
            print(loss.line())
        print(f"{len(losses)} loss{'' if len(losses) == 1 else 'es'} recorded by flow {config.name} ({ledger.path})")
    return ExitCode.ATTENTION if losses else ExitCode.OK


def _plot(config: FlowConfig, path: str, minutes: float) -> ExitCode:
    import time

    from dr_stream.operations.lag_plot import draw_lag
    from dr_stream.replication.lag_history import read_samples

    with ClusterContext(config.destination) as destination:
        samples = read_samples(destination, config.name, int((time.time() - minutes * 60) * 1000))
    if not samples:
        print(f"dr-stream: status: no lag samples of flow {config.name} on {config.destination.alias} in the last "
              f"{minutes:g} minutes (the flow records them while it runs)", file=sys.stderr)
        return ExitCode.FAILED
    drawn = draw_lag(samples, path, config.name)
    print(f"{path}: lag of {len(drawn['records'])} topics over {len(samples)} samples")
    return ExitCode.OK


def add_report_commands(sub: argparse._SubParsersAction[Any]) -> None:
    status = sub.add_parser("status", help="replication lag per partition and translation age")
    status.add_argument("--config", required=True, help="the flow's YAML file")
    status.add_argument("--json", action="store_true", help="the result as JSON on stdout (progress lines on stderr)")
    status.add_argument("--max-lag-records", type=int, help="exit 2 when a partition lags by more records")
    status.add_argument("--max-lag-seconds", type=float,
                        help="exit 2 when a partition's oldest record not copied yet is older")
    status.add_argument("--max-translation-age", type=float,
                        help="exit 2 when a group committed on the source since its last translation and "
                             "that translation is older (seconds)")
    status.add_argument("--plot", metavar="FILE.png",
                        help="draw lag (records and seconds) per topic over the recent past, from what the running "
                             "flow recorded on the destination, instead of the table")
    status.add_argument("--since", type=float, default=60.0, metavar="MINUTES", help="with --plot: how far back")
    status.set_defaults(func=_status)

    drill = sub.add_parser("drill", help="check, changing nothing, that failover would work now: topics, lag within "
                                         "the RPO, exact and current translations, a dry run for every group")
    drill.add_argument("--config", required=True, help="the flow's YAML file")
    drill.add_argument("--rpo-seconds", type=float, help="the most a failover may lose, in seconds of records not "
                                                         "copied yet (default: drill.rpo of the flow file, 60 s)")
    drill.add_argument("--max-translation-age", type=float, metavar="SECONDS",
                       help="the longest a group that moved may wait for its translation (default: "
                            "drill.max_translation_age, 60 s)")
    drill.add_argument("--losses-since", metavar="DURATION",
                       help="fail on each loss recorded this recently, e.g. 7d, 12h (default: drill.losses_since, 7d)")
    drill.add_argument("--json", action="store_true", help="the result as JSON on stdout (progress lines on stderr)")
    drill.set_defaults(func=_drill)

    losses = sub.add_parser("losses", help="source records the flow could no longer copy (retention, a recreated "
                                           "topic, rewound offsets, a skipped refused record); exit 2 if any")
    losses.add_argument("--config", required=True, help="the flow's YAML file")
    losses.add_argument("--json", action="store_true", help="the result as JSON on stdout (progress lines on stderr)")
    losses.set_defaults(func=_losses)
