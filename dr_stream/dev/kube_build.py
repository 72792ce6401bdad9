"""The dev Kubernetes' own binaries, built from the Go module proxy and cached.

No Kubernetes distribution (k3s, kind, minikube) is reachable from where dr-stream is built and
tested, but the Go module proxy serves `k8s.io/kubernetes` and its staging modules, and etcd's
server module. `k8s.io/kubernetes` replaces each staging module (`k8s.io/api`, ...) with a
directory of its own repository, which a module that requires it cannot use; so the build
module here requires it and maps every staging module to the published version that belongs to
it (v0.X.Y for Kubernetes v1.X.Y), read from Kubernetes' own `go.mod`. CoreDNS, the cluster's
DNS, installs as it is published.

Invariant: a build lands in `<tools cache>/kube/bin/<kubernetes version>-<etcd version>/` only whole
(into a staging directory, then renamed), so a directory that exists holds every binary; the
first build takes 20-30 minutes on 2 cores, every later `up` finds it there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dr_stream.dev.commands import run
from dr_stream.runtime.paths import tools_cache

# 1.34: the last minor whose kubelet runs on cgroup v1 without being told to (1.35 refuses it).
KUBERNETES_VERSION = "v1.34.4"
ETCD_VERSION = "v3.6.16"
# The cluster's DNS: Spark's executors find their driver by its Service's name.
COREDNS_VERSION = "v1.14.7"

KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl")
ETCD_PACKAGE = "go.etcd.io/etcd/server/v3"
BUILD = 3  # raised when how the binaries are built changes, so a cached older build is not used

_STAGING = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s*=>\s*\./staging/src/k8s\.io/[\w.-]+\s*$", re.M)
_GO_VERSION = re.compile(r"^go (\d+\.\d+(?:\.\d+)?)\s*$", re.M)


@dataclass(frozen=True)
class KubeBinaries:
    """Where one build's binaries are; `path(name)` for each of `KUBE_COMMANDS` and `etcd`."""

    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    def complete(self) -> bool:
        return all(self.path(n).is_file() for n in (*KUBE_COMMANDS, "etcd", "coredns"))


def binaries(root: Path | None = None) -> KubeBinaries:
    return KubeBinaries((root or tools_cache() / "kube") / "bin" / f"{KUBERNETES_VERSION}-{ETCD_VERSION}-{BUILD}")


def staging_version(kubernetes_version: str) -> str:
    """The published version of Kubernetes' staging modules for a release: v1.34.4 -> v0.34.4."""
    major, minor, patch = kubernetes_version.lstrip("v").split(".")
    if major != "1":
        raise ValueError(f"Kubernetes {kubernetes_version}: staging versions are known for 1.x only")
    return f"v0.{minor}.{patch}"


def staging_modules(kubernetes_go_mod: str) -> list[str]:
    """The staging modules Kubernetes' `go.mod` replaces with directories of its own repository."""
    return sorted(set(_STAGING.findall(kubernetes_go_mod)))


def build_go_mod(kubernetes_go_mod: str, kubernetes_version: str = KUBERNETES_VERSION) -> str:
    """The build module's `go.mod`: Kubernetes at `kubernetes_version`, each staging module
    replaced by its published version, and Kubernetes' own Go version."""
    go = _GO_VERSION.search(kubernetes_go_mod)
    staging = staging_version(kubernetes_version)
    lines = ["module drstream.dev/kube", "", f"go {go.group(1) if go else '1.24'}", "",
             f"require k8s.io/kubernetes {kubernetes_version}", "", "replace ("]
    lines += [f"\t{module} => {module} {staging}" for module in staging_modules(kubernetes_go_mod)]
    lines += [")", ""]
    return "\n".join(lines)


TOOLS_GO = """//go:build tools

// The commands the dev Kubernetes runs, kept in this module's requirements.
package tools

import (
{imports}
)
"""


def tools_go() -> str:
    imports = "\n".join(f'\t_ "k8s.io/kubernetes/cmd/{c}"' for c in KUBE_COMMANDS)
    return TOOLS_GO.format(imports=imports)


def version_flags(kubernetes_version: str = KUBERNETES_VERSION) -> str:
    """The linker flags that give the binaries their release's version (what `kubectl version` and
    the node's kubeletVersion show; a plain `go build` leaves v0.0.0-master)."""
    major, minor, _ = kubernetes_version.lstrip("v").split(".")
    package = "k8s.io/component-base/version"
    return " ".join(f"-X {package}.{key}={value}" for key, value in
                    (("gitVersion", kubernetes_version), ("gitMajor", major), ("gitMinor", minor),
                     ("gitTreeState", "clean")))


def build(root: Path | None = None, say: Callable[[str], None] = print) -> KubeBinaries:
    """Builds the binaries unless a complete build is cached; returns where they are."""
    target = binaries(root)
    if target.complete():
        return target
    if shutil.which("go") is None:
        raise RuntimeError("go not found on PATH: the dev Kubernetes is built with Go from the module proxy")
    work = target.directory.parent.parent / "src" / KUBERNETES_VERSION
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false", "GOTOOLCHAIN": "local"}
    say(f"kube: fetching k8s.io/kubernetes {KUBERNETES_VERSION}'s go.mod from the module proxy ...")
    module = run("go", "mod", "download", "-json", f"k8s.io/kubernetes@{KUBERNETES_VERSION}", cwd=work, env=env)
    info = json.loads(module)
    (work / "go.mod").write_text(build_go_mod(Path(info["GoMod"]).read_text()))
    (work / "tools.go").write_text(tools_go())
    say("kube: resolving modules (go mod tidy) ...")
    run("go", "mod", "tidy", cwd=work, env=env)
    staging = target.directory.with_name(target.directory.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for command in KUBE_COMMANDS:
        say(f"kube: building {command} (the first build takes 20-30 minutes on 2 cores) ...")
        run("go", "build", "-trimpath", f"-ldflags=-s -w {version_flags()}", "-o", str(staging / command),
            f"k8s.io/kubernetes/cmd/{command}", cwd=work, env=env)
    say(f"kube: building etcd {ETCD_VERSION} ...")
    etcd_work = work.parent / f"etcd-{ETCD_VERSION}"
    etcd_work.mkdir(parents=True, exist_ok=True)
    if not (etcd_work / "go.mod").exists():
        run("go", "mod", "init", "drstream.dev/etcd", cwd=etcd_work, env=env)
    run("go", "get", f"{ETCD_PACKAGE}@{ETCD_VERSION}", cwd=etcd_work, env=env)
    run("go", "build", "-trimpath", "-ldflags=-s -w", "-o", str(staging / "etcd"), ETCD_PACKAGE, cwd=etcd_work, env=env)
    say(f"kube: building CoreDNS {COREDNS_VERSION} ...")
    run("go", "install", "-trimpath", "-ldflags=-s -w", f"github.com/coredns/coredns@{COREDNS_VERSION}", cwd=work,
        env={**env, "GOBIN": str(staging), "GOFLAGS": "-buildvcs=false"})
    shutil.rmtree(target.directory, ignore_errors=True)
    staging.rename(target.directory)
    say(f"kube: binaries in {target.directory}")
    return target


def main() -> int:
    build()
    return 0


if __name__ == "__main__":
    sys.exit(main())
