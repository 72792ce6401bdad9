"""One way the dev tools run a program and read what it printed: its output back, or one error
that names the program and ends with what it said."""

from __future__ import annotations

import subprocess
from pathlib import Path


def run(*command: str, cwd: Path | None = None, env: dict[str, str] | None = None, check: bool = True,
        stdin: str | None = None) -> str:
    """`command`'s standard output; with `check`, a RuntimeError when it exits non-zero."""
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, input=stdin)
    if check and done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-1500:]
        raise RuntimeError(f"{command[0]} {' '.join(command[1:3])} failed: {said}")
    return done.stdout
