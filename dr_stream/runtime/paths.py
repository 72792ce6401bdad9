"""Where dr-stream keeps its working files.

Everything the project downloads or generates lives under one cache directory
(`<project>/.cache` by default, `DR_STREAM_CACHE` to move it), so a fresh clone
rebuilds it and `git clean` removes it.
"""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The checkout dr-stream runs from: DR_STREAM_HOME, else the directory above the package."""
    env = os.environ.get("DR_STREAM_HOME")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve().parents[2]
    if (here / "pyproject.toml").exists():
        return here
    return Path.cwd()


def cache_dir() -> Path:
    env = os.environ.get("DR_STREAM_CACHE")
    return Path(env).resolve() if env else project_root() / ".cache"
