"""What every `dr-stream` command shares: its arguments, the flow file they name, and that flow's
config, tables, Spark session and cluster contexts.

A command is a function of one `CommandContext` returning an `ExitCode`. The context makes each
thing at its first use and once: the config is read when a command first asks for it (so
`dev`, which names no flow, reads none), the Spark session is started only when a table
`deltalake` cannot open, or a command that needs Spark, asks for it, and the tables and the
cluster contexts read through that same session. Presentation stays in the command (what goes
to stdout and to stderr); the work is done by the operation it calls.

Invariant: a command's progress and findings go to stderr through `say`, its result alone to
stdout; a refusal of the command line is one line naming the command (`refused`, exit 64).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection
from functools import cached_property
from typing import TYPE_CHECKING

from dr_stream.core.config import FlowConfig, load_flow
from dr_stream.exit_codes import ExitCode
from dr_stream.kafka.cluster_context import FlowClusters

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dr_stream.operations.flow_tables import FlowTables


def say(line: str) -> None:
    """A progress line or a finding: stderr, at once."""
    print(line, file=sys.stderr, flush=True)


class CommandContext:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    @property
    def command(self) -> str:
        return str(self.args.command)

    @cached_property
    def config(self) -> FlowConfig:
        """The flow file `--config` names, read once (a bad one: ConfigError, one line)."""
        return load_flow(self.args.config)

    @cached_property
    def spark(self) -> SparkSession:
        """The command's Spark session, started at the first ask (`runtime.session.command_spark`)."""
        from dr_stream.runtime.session import command_spark

        return command_spark(self.config)

    @cached_property
    def tables(self) -> FlowTables:
        """The flow's tables, read without a JVM; through `spark` only where `deltalake` cannot open them."""
        from dr_stream.operations.flow_tables import FlowTables

        return FlowTables.of(self.config, lambda: self.spark, say)

    def clusters(self, unchecked: Collection[str] = ()) -> FlowClusters:
        """The flow's two cluster contexts, each checked against the cluster.id the state recorded
        (except the roles in `unchecked`); the caller closes them (`with`)."""
        return FlowClusters.of(self.config, lambda: self.spark, unchecked)

    def refused(self, why: str) -> ExitCode:
        """The command line asks for what the command cannot do: said in one line, exit 64."""
        print(f"dr-stream: {self.command}: {why}", file=sys.stderr)
        return ExitCode.USAGE
