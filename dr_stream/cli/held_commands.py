"""`dr-stream skip` and `dr-stream retry`: the operator's answer to a partition held at a record the
destination refused (what each does, and why a skip is a recorded loss: `operations.held_records`)."""

from __future__ import annotations

import argparse
from typing import Any

from dr_stream.cli.command_context import CommandContext
from dr_stream.exit_codes import ExitCode
from dr_stream.operations.held_records import NotHeld, retry_held, skip_held
from dr_stream.replication.losses import Loss


def _released(ctx: CommandContext) -> ExitCode:
    args, config = ctx.args, ctx.config
    release = retry_held if args.retry else skip_held
    with ctx.clusters() as clusters:
        clusters.unreachable()  # each cluster that answers must be the one the state belongs to
    try:
        done = release(ctx.tables, args.topic, args.partition, args.offset, lambda: ctx.spark)
    except NotHeld as exc:
        return ctx.refused(str(exc))
    if isinstance(done, Loss):
        print(f"LOSS: {done.line()}; recorded in {config.streaming.losses}. The flow goes on from offset "
              f"{done.first_offset + 1} within seconds (at its next start if it is stopped)")
    else:
        print(f"{done.topic}[{done.partition}]: the record at offset {done.offset} is tried again within seconds (at "
              "the flow's next start if it is stopped); if the destination refuses it again, the partition is held "
              "again")
    return ExitCode.OK


def add_held_commands(sub: argparse._SubParsersAction[Any]) -> None:
    for name, retry, what in (
            ("skip", False, "let a partition held at a record the destination refused go on past it; the record "
                            "is recorded as a refused loss"),
            ("retry", True, "copy the record a partition is held at again, once the destination was changed to "
                            "take it")):
        command = sub.add_parser(name, help=what)
        command.add_argument("--config", required=True, help="the flow's YAML file")
        command.add_argument("--topic", required=True, help="the source topic")
        command.add_argument("--partition", required=True, type=int, help="the source partition")
        command.add_argument("--offset", required=True, type=int, help="the offset the partition is held at")
        command.set_defaults(func=_released, retry=retry, command=name)
