"""The README's code agrees with the code: each `from dr_stream... import` it shows imports."""

from __future__ import annotations

import importlib
import re

from dr_stream.runtime.paths import project_root


def test_every_import_the_readme_shows_names_a_module_and_a_name_that_exist():
    readme = (project_root() / "README.md").read_text()
    shown = re.findall(r"^from (dr_stream[\w.]*) import ([\w, ]+)$", readme, re.MULTILINE)
    assert shown, "the README shows how to import its helpers"
    missing = [f"{module}.{name.strip()}" for module, names in shown for name in names.split(",")
               if not hasattr(importlib.import_module(module), name.strip())]
    assert missing == []


def test_the_readme_lists_every_exit_code_as_the_code_defines_it():
    from dr_stream.exit_codes import markdown_table

    assert markdown_table() in (project_root() / "README.md").read_text()


def test_a_verdict_a_wrong_command_line_and_a_wrong_flow_file_exit_differently(tmp_path):
    import subprocess
    import sys

    from dr_stream.exit_codes import ExitCode

    def exit_of(*args: str) -> int:
        return subprocess.run([sys.executable, "-m", "dr_stream.cli", *args], capture_output=True).returncode

    missing = str(tmp_path / "missing.yaml")
    assert exit_of("status", "--no-such-option") == ExitCode.USAGE
    assert exit_of("check-config", "--config", missing) == ExitCode.CONFIG
    assert len({int(code) for code in ExitCode}) == len(ExitCode)
    assert ExitCode.ATTENTION not in (ExitCode.USAGE, ExitCode.CONFIG)


def test_the_cli_reference_is_the_one_the_parser_writes():
    from tools.cli_reference import OUT, render

    assert OUT.read_text() == render(), "run `python -m tools.cli_reference` after changing the CLI"
