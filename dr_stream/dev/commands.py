"""One way the dev tools run a program and read what it printed: its output back, or one error
that names the program and ends with what it said; and one way they install what Debian packages."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path


def run(*command: str, cwd: Path | None = None, env: dict[str, str] | None = None, check: bool = True,
        stdin: str | None = None) -> str:
    """`command`'s standard output; with `check`, a RuntimeError when it exits non-zero."""
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, input=stdin)
    if check and done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-1500:]
        raise RuntimeError(f"{command[0]} {' '.join(command[1:3])} failed: {said}")
    return done.stdout


def ensure_debian_packages(wanted: dict[str, str], say: Callable[[str], None] = print) -> None:
    """Installs each package of `wanted` (package -> a file it installs) whose file is missing,
    with apt-get; without root, one line naming them and the command that would."""
    missing = [package for package, path in wanted.items() if not Path(path).exists()]
    if not missing:
        return
    if os.geteuid() != 0:
        raise RuntimeError(f"Debian packages {', '.join(missing)} are missing and only root can install them: "
                           f"apt-get install {' '.join(missing)}")
    say(f"installing {', '.join(missing)} from Debian's packages ...")
    run("apt-get", "install", "-y", "-q", "--no-install-recommends", *missing,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
