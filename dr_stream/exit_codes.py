"""What a dr-stream command's exit status means, one number per meaning.

A cron job or an alert acts on the number alone, so a verdict that needs attention is never the
same number as a mistake in the command line or the flow file. Verdicts keep the numbers the
commands have always used (status, drill and losses exit 2 when something needs attention, 3
when a cluster does not answer); usage and config errors take the numbers of BSD's sysexits
(64, 78), which no verdict uses.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    # The command ran and did not do all it was asked: a group not synced, a failback refused,
    # a flow whose Spark stopped under it, a dev cluster not running.
    FAILED = 1
    # A verdict that needs attention: over a `status` threshold, a partition held at a refused
    # record, `drill` not ready for failover, losses recorded.
    ATTENTION = 2
    # A cluster did not answer, or refused dr-stream's credentials; the line names where to look.
    UNREACHABLE = 3
    # The command line is wrong: an unknown option or value, `skip` at a record not held.
    USAGE = 64
    # The flow file is wrong: one line names the file and the key.
    CONFIG = 78
    # Stopped by Ctrl-C (128 + SIGINT), as shells report it.
    INTERRUPTED = 130

    @property
    def meaning(self) -> str:
        return _MEANINGS[self]


_MEANINGS = {
    ExitCode.OK: "done; for status, drill and losses: nothing needs attention",
    ExitCode.FAILED: "the command ran and did not do all it was asked (a group not synced, a failback refused, "
                     "Spark stopped under a flow)",
    ExitCode.ATTENTION: "a verdict needs attention: over a status threshold, a partition held, drill not ready, "
                        "losses recorded",
    ExitCode.UNREACHABLE: "a cluster did not answer or refused dr-stream's credentials",
    ExitCode.USAGE: "the command line is wrong (argparse's own errors included)",
    ExitCode.CONFIG: "the flow file is wrong; one line names the file and the key",
    ExitCode.INTERRUPTED: "stopped by Ctrl-C",
}


def markdown_table() -> str:
    """The exit codes as the README's table and the command reference's (a test keeps them equal)."""
    rows = [f"| {code.value} | `{code.name}` | {code.meaning} |" for code in ExitCode]
    return "\n".join(["| exit | name | when |", "|---:|---|---|", *rows])
