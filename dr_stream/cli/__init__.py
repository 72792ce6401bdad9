"""`dr-stream` command line: local clusters, running a flow, translation, failover, status, setup.

One layer: each command is a function of a `CommandContext` (`command_context`: its arguments and
the flow file's config, tables, Spark session and cluster contexts, each made once at its first
use) returning an `ExitCode`, declared with its options in the module of its concept
(`flow_commands`, `group_commands`, `report_commands`, `held_commands`). This module builds the
parser from them and turns whatever a command raises into one line and an exit code.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import NoReturn

from dr_stream import __version__
from dr_stream.cli.command_context import CommandContext
from dr_stream.cli.flow_commands import add_flow_commands, add_setup_commands, add_state_commands
from dr_stream.cli.group_commands import add_group_commands, add_offsets_commands
from dr_stream.cli.held_commands import add_held_commands
from dr_stream.cli.report_commands import add_report_commands
from dr_stream.core.config import ConfigError
from dr_stream.exit_codes import ExitCode
from dr_stream.kafka.reachability import ClusterAccessError
from dr_stream.kafka.waits import WAITS
from dr_stream.log_format import writes_json


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
    # in the order `dr-stream --help` lists them
    for add in (add_flow_commands, add_group_commands, add_state_commands, add_report_commands, add_held_commands,
                add_offsets_commands, add_setup_commands):
        add(sub)
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
        return int(args.func(CommandContext(args)))
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
