"""dr-stream's driver and executor image, made without Docker from Debian's packages and `make dist`.

The layout is the one `deploy/kubernetes/Dockerfile` builds for users who have Docker:

* Debian 12 with Java 17 (`openjdk-17-jre-headless`), Python 3.11, `tini` and `bash`;
* `/opt/dr-stream/venv`: pyspark at the pinned Spark, dr-stream's dependencies and its wheel;
* `/opt/spark`: a link to that pyspark, which carries Spark's `bin/` and `jars/` (its Kubernetes
  jars among them), with the flow's jars (`make dist`'s `jars/`) added to `jars/`;
* `/opt/dr-stream/jobs/replicate.py`, the job spark-submit runs;
* `/opt/entrypoint.sh` (`deploy/kubernetes/entrypoint.sh`), which turns Spark's `driver` and
  `executor` arguments into the driver's spark-submit and the executor's JVM;
* the user `spark` (uid 185, as Spark's own images have it).

Two layers: the Debian root file system (debootstrap, cached by its package list) and dr-stream's
(`/opt` and the user), made in an overlay on top of it so the second layer holds only what the
installation added. The packages come from Debian's mirror, the Python wheels from this
machine's pip (built once into a wheel house), the jars from `make dist`.

Invariant: an image archive exists only whole; the same inputs give the same layer digests.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from dr_stream.dev import oci_image
from dr_stream.dev.commands import ensure_debian_packages, run
from dr_stream.dev.kube_configs import IMAGE, PAUSE_IMAGE
from dr_stream.runtime.dist import dist_dir
from dr_stream.runtime.jvm import JvmPins
from dr_stream.runtime.paths import cache_dir, project_root, tools_cache

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("openjdk-17-jre-headless", "python3", "python3-venv", "tini", "bash", "procps", "ca-certificates")
VENV = "/opt/dr-stream/venv"
SPARK_HOME = "/opt/spark"
SPARK_UID = 185
WORK_DIR = "/opt/dr-stream/work"
BUILD = 2  # raised when how the image is laid out changes, so an archive of an older layout is not reused
ENV = [oci_image.DEFAULT_PATH, "JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64", f"SPARK_HOME={SPARK_HOME}",
       f"PYSPARK_PYTHON={VENV}/bin/python", f"PYSPARK_DRIVER_PYTHON={VENV}/bin/python", "LANG=C.UTF-8"]

Say = Callable[[str], None]

PAUSE_GO = """package main

// The pod sandbox's first process: holds the pod's namespaces until it is told to stop.
import (
\t"os"
\t"os/signal"
\t"syscall"
)

func main() {
\tstop := make(chan os.Signal, 1)
\tsignal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
\t<-stop
}
"""


def pause_archive(work: Path) -> Path:
    """The pod sandbox's image (`PAUSE_IMAGE`): one static binary that holds the pod's
    namespaces until it is told to stop, built with Go, made once."""
    archive = work / "pause.tar"
    if archive.exists():
        return archive
    source = work / "pause-src"
    source.mkdir(parents=True, exist_ok=True)
    (source / "main.go").write_text(PAUSE_GO)
    if not (source / "go.mod").exists():
        run("go", "mod", "init", "drstream.dev/pause", cwd=source)
    env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local"}
    run("go", "build", "-trimpath", "-ldflags=-s -w", "-o", str(source / "pause"), ".", cwd=source, env=env)
    layer = oci_image.layer_from_tar(
        oci_image.layer_tar([oci_image.FileEntry("pause", (source / "pause").read_bytes(), 0o755)]),
        source / "pause.layer")
    oci_image.write_archive(archive, PAUSE_IMAGE, [layer], oci_image.ImageConfig(entrypoint=["/pause"]))
    return archive


def _digest(*parts: str | bytes) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part.encode() if isinstance(part, str) else part)
    return sha.hexdigest()[:16]


def base_rootfs(work: Path, say: Say = print) -> Path:
    """Debian's minimal root file system with `PACKAGES`, made once per package list."""
    target = work.resolve() / f"rootfs-{SUITE}-{_digest(SUITE, *PACKAGES)}"
    if (target / "etc" / "debian_version").exists():
        return target
    ensure_debian_packages({"debootstrap": "/usr/sbin/debootstrap"}, say)
    staging = target.with_name(target.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    say(f"image: debootstrap {SUITE} with {', '.join(PACKAGES)} (a few minutes, once) ...")
    run("debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(staging), MIRROR)
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for item in (staging / cache).glob("*"):
            if item.is_file():
                item.unlink()
    staging.rename(target)
    return target


def wheel_house(work: Path, dist: Path, pins: JvmPins, say: Say = print) -> Path:
    """Every wheel the image's venv installs, built with this machine's pip (Python 3.11, like
    Debian 12's), so the image's installation needs no index."""
    requirements = (dist / "requirements.txt").read_text() + (dist / "requirements-no-deps.txt").read_text()
    wheels = work / f"wheels-{_digest(requirements, pins.spark)}"
    if (wheels / "complete").exists():
        return wheels
    say("image: building the wheel house ...")
    wheels.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "-w", str(wheels)]
    run(*pip, f"pyspark=={pins.spark}", "-r", str(dist / "requirements.txt"))
    run(*pip, "--no-deps", "-r", str(dist / "requirements-no-deps.txt"))
    (wheels / "complete").write_text("")
    return wheels


def _mount_overlay(lower: Path, upper: Path, scratch: Path, merged: Path) -> None:
    for directory in (upper, scratch, merged):
        directory.mkdir(parents=True, exist_ok=True)
    run("mount", "-t", "overlay", "overlay", "-o", f"lowerdir={lower},upperdir={upper},workdir={scratch}",
        str(merged))


def _install_app(merged: Path, wheels: Path, dist: Path) -> None:
    """Into the mounted root: the venv, the wheel, the jars, the job, the entry point, the user."""
    chroot = ["chroot", str(merged)]
    house = merged / "tmp" / "wheels"
    shutil.copytree(wheels, house)
    wheel = next(dist.glob("dr_stream-*.whl"))
    shutil.copy2(wheel, house / wheel.name)
    run(*chroot, "python3", "-m", "venv", VENV)
    pip = [*chroot, f"{VENV}/bin/pip", "install", "-q", "--disable-pip-version-check", "--no-index",
           "--find-links", "/tmp/wheels"]
    run(*pip, "pyspark", "-r", "/tmp/wheels/requirements.txt")
    run(*pip, "--no-deps", "-r", "/tmp/wheels/requirements-no-deps.txt", f"/tmp/wheels/{wheel.name}")
    shutil.rmtree(house)
    pyspark = next((merged / VENV.lstrip("/")).glob("lib/python3*/site-packages/pyspark"))
    (merged / SPARK_HOME.lstrip("/")).symlink_to("/" + str(pyspark.relative_to(merged)))
    for jar in sorted((dist / "jars").glob("*.jar")):
        shutil.copy2(jar, pyspark / "jars" / jar.name)
    jobs = merged / "opt" / "dr-stream" / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    shutil.copy2(dist / "replicate.py", jobs / "replicate.py")
    entrypoint = merged / "opt" / "entrypoint.sh"
    shutil.copy2(project_root() / "deploy" / "kubernetes" / "entrypoint.sh", entrypoint)
    entrypoint.chmod(0o755)
    run(*chroot, "useradd", "--uid", str(SPARK_UID), "--home-dir", SPARK_HOME, "--no-create-home",
        "--shell", "/bin/bash", "spark")
    # the driver's working directory: spark-submit downloads the flow file (`--files`) into it
    work = merged / WORK_DIR.lstrip("/")
    work.mkdir(parents=True, exist_ok=True)
    os.chown(work, SPARK_UID, SPARK_UID)


def _base_layer(rootfs: Path, path: Path, say: Say) -> oci_image.Layer:
    """The root file system's layer, packed once; its digests are kept beside it."""
    facts = path.with_name(path.name + ".json")
    if path.exists() and facts.exists():
        return oci_image.Layer.load(facts, path)
    say("image: packing the base layer ...")
    layer = oci_image.layer_from_directory(rootfs, path)
    layer.save(facts)
    return layer


def build_image(work: Path | None = None, dist: Path | None = None, say: Say = print,
                shared: Path | None = None) -> Path:
    """The image archive for `IMAGE` (`oci_image.write_archive`), built unless one for these
    inputs is there; `make dist` must have run. What no checkout changes (the Debian root, its
    layer, the wheel house, each named by the digest of what made it) is kept in `shared`, the
    tools cache outside the checkout, so a fresh clone builds dr-stream's own layer only."""
    work = work or cache_dir() / "kube" / "image"
    shared = shared or tools_cache() / "kube" / "image"
    dist = dist or dist_dir()
    if not (dist / "requirements.txt").exists():
        raise RuntimeError(f"image: no {dist / 'requirements.txt'}: run `make dist` first")
    pins = JvmPins.load()
    inputs = [p.read_bytes() for p in sorted(dist.glob("*.whl"))] + [
        p.name.encode() for p in sorted((dist / "jars").glob("*.jar"))] + [
        (dist / "replicate.py").read_bytes(), (project_root() / "deploy" / "kubernetes" / "entrypoint.sh").read_bytes()]
    archive = work / f"dr-stream-{_digest(*inputs, *PACKAGES, pins.spark, str(BUILD))}.tar"
    if archive.exists():
        return archive
    rootfs = base_rootfs(shared, say)
    base_layer = _base_layer(rootfs, shared / f"{rootfs.name}.layer.tar.gz", say)
    wheels = wheel_house(shared, dist, pins, say)
    shutil.copy2(dist / "requirements.txt", wheels / "requirements.txt")
    shutil.copy2(dist / "requirements-no-deps.txt", wheels / "requirements-no-deps.txt")
    build = work / "build"
    merged = build / "merged"
    if merged.is_mount():
        run("umount", str(merged))
    shutil.rmtree(build, ignore_errors=True)
    say("image: installing dr-stream into the image ...")
    _mount_overlay(rootfs, build / "upper", build / "scratch", merged)
    try:
        # what venv's ensurepip and useradd expect to find in a root
        run("mount", "-t", "proc", "proc", str(merged / "proc"))
        run("mount", "--bind", "/dev", str(merged / "dev"))
        _install_app(merged, wheels, dist)
    finally:
        for mount in (merged / "dev", merged / "proc", merged):
            if mount.is_mount():
                run("umount", str(mount))
    say("image: packing dr-stream's layer ...")
    app_layer = oci_image.layer_from_directory(build / "upper", work / "app.layer.tar.gz")
    config = oci_image.ImageConfig(entrypoint=["/opt/entrypoint.sh"], env=ENV, working_dir=WORK_DIR,
                                   user=str(SPARK_UID))
    oci_image.write_archive(archive, IMAGE, [base_layer, app_layer], config)
    app_layer.path.unlink()
    shutil.rmtree(build, ignore_errors=True)
    return archive
