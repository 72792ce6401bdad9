"""helm, built from the Go module proxy and cached outside the checkout, for the chart's tests.

No helm release archive is reachable from where dr-stream is built and tested, but the Go module
proxy serves `helm.sh/helm/v4`, whose `cmd/helm` is the helm command itself. It is built once per
version into `tools_cache()/helm/<version>/helm` (into a staging directory, then renamed, so a
directory that exists holds a whole build); every later checkout finds it there.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from dr_stream.dev.commands import run
from dr_stream.runtime.paths import tools_cache

HELM_MODULE = "helm.sh/helm/v4"
HELM_VERSION = "v4.3.2"


def helm_binary(root: Path | None = None) -> Path:
    return (root or tools_cache() / "helm") / HELM_VERSION / "helm"


def version_flags(version: str = HELM_VERSION) -> str:
    """The linker flags that make `helm version` name its release (a plain build says v4.0+unreleased)."""
    return f"-X {HELM_MODULE}/internal/version.version={version} -X {HELM_MODULE}/internal/version.gitTreeState=clean"


def build_helm(root: Path | None = None, say: Callable[[str], None] = print) -> Path:
    """Builds helm unless a build of this version is cached; returns its path."""
    target = helm_binary(root)
    if target.is_file():
        return target
    if shutil.which("go") is None:
        raise RuntimeError("go not found on PATH: helm is built with Go from the module proxy")
    work = target.parent.parent / "src" / HELM_VERSION
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false", "GOTOOLCHAIN": "local"}
    if not (work / "go.mod").exists():
        run("go", "mod", "init", "drstream.dev/helm", cwd=work, env=env)
    say(f"helm: fetching {HELM_MODULE} {HELM_VERSION} from the module proxy ...")
    run("go", "get", f"{HELM_MODULE}@{HELM_VERSION}", cwd=work, env=env)
    staging = target.parent.with_name(target.parent.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    say("helm: building (a few minutes on 2 cores, once) ...")
    run("go", "build", "-trimpath", f"-ldflags=-s -w {version_flags()}", "-o", str(staging / "helm"),
        f"{HELM_MODULE}/cmd/helm", cwd=work, env=env)
    shutil.rmtree(target.parent, ignore_errors=True)
    staging.rename(target.parent)
    say(f"helm: {target}")
    return target


def main() -> int:
    build_helm()
    return 0


if __name__ == "__main__":
    sys.exit(main())
