"""`docs/reference/cli.md`, written from the CLI's own parser (`python -m tools.references`).

Every command, its one-line purpose, its arguments with their help and defaults, and the exit
codes, as `dr-stream --help` knows them; a test keeps the committed file equal to this output,
so the reference cannot drift from the code.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dr_stream.cli import parser
from dr_stream.exit_codes import markdown_table

OUT = Path(__file__).resolve().parent.parent / "docs" / "reference" / "cli.md"


def _commands(top: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help or "" for c in sub._choices_actions}
    return [(name, helps.get(name, ""), command) for name, command in sub.choices.items()]


def _argument(action: argparse.Action) -> str:
    names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest}`"
    if action.option_strings and action.nargs != 0:
        names += f" {action.metavar or action.dest.upper()}"
    notes = []
    if action.required:
        notes.append("required")
    if action.default not in (None, False, argparse.SUPPRESS) and action.nargs != 0:
        notes.append(f"default `{action.default}`")
    text = " ".join((action.help or "").split())
    return f"| {names} | {text}{' (' + ', '.join(notes) + ')' if notes else ''} |"


def render() -> str:
    top = parser()
    lines = ["# dr-stream command reference", "",
             "Generated from the CLI's parser by `python -m tools.references`; a test keeps it equal to the "
             "code. `dr-stream COMMAND --help` prints the same.", ""]
    own = [a for a in top._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    if own:
        lines += ["## `dr-stream`", "", "Options of the command itself, before any command name.", "",
                  "| argument | meaning |", "|---|---|", *(_argument(a) for a in own), ""]
    for name, purpose, command in _commands(top):
        arguments = [a for a in command._actions if not isinstance(a, argparse._HelpAction)]
        lines += [f"## `dr-stream {name}`", "", " ".join(purpose.split()), ""]
        if arguments:
            lines += ["| argument | meaning |", "|---|---|", *(_argument(a) for a in arguments), ""]
    lines += ["## Exit codes", "", "Every command's exit status means one thing (`dr_stream/exit_codes.py`):", "",
              markdown_table(), ""]
    return "\n".join(lines)
