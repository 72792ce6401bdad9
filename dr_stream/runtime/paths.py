"""Where dr-stream keeps its working files.

Everything the project downloads or generates lives under one cache directory
(`<project>/.cache` by default, `DR_STREAM_CACHE` to move it), so a fresh clone
rebuilds it and `git clean` removes it. The tools built from source that no clone changes (the dev
Kubernetes' binaries, helm) are the exception: they take half an hour to build and are the same
for every checkout, so they live in a cache outside it (`tools_cache`).
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


def tools_cache() -> Path:
    """Where tools built from the Go module proxy are kept for every checkout of this machine:
    DR_STREAM_TOOLS_CACHE, else `$XDG_CACHE_HOME/dr-stream` (`~/.cache/dr-stream`). Each build
    lands in a directory named after its versions, whole or not at all."""
    env = os.environ.get("DR_STREAM_TOOLS_CACHE")
    if env:
        return Path(env).resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dr-stream"
