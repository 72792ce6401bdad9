"""What a cluster needs to run a flow, built into `.cache/dist/` by `make dist`.

* `dr_stream-<version>-py3-none-any.whl`: the package.
* `requirements.txt`: its runtime dependencies except pyspark, pinned as in `pyproject.toml`.
  Spark puts its own pyspark (`pyspark.zip`, matching its jars) on the driver's path, so a
  second copy would only add 400 MB and a chance of disagreeing with the JVM. `delta-spark`
  is in `requirements-no-deps.txt`: it declares pyspark as a dependency, so it is installed
  without its dependencies.
* `pyenv.tar.gz`: a virtual environment with exactly those (less `deltalake`, which only the
  commands use), no dev tools, for YARN's
  `--archives pyenv.tar.gz#pyenv`; its `bin/python` links to the interpreter it was built
  with, so the cluster's nodes need Python at that path (the nodes share the OS image, as
  YARN deployments of Python applications generally assume).
* `jars/`: the jars spark-submit ships (Kafka connector, Delta, dr-stream's sink) and
  `jobs/replicate.py`, so a container image can be built from this directory alone.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

from dr_stream.runtime.jvm import spark_jars
from dr_stream.runtime.paths import cache_dir, project_root

# Provided by Spark itself (see above), never installed beside it.
_PROVIDED = {"pyspark"}
# Installed with --no-deps: each declares a dependency on a provided package.
_NO_DEPS = {"delta-spark"}
# Only the commands use it (failover, translate, status read the tables natively); a flow's
# driver and executors never do, so the archive YARN ships with every submission leaves out its
# 50 MB. The container image, where operators also run the commands, installs it.
_COMMANDS_ONLY = {"deltalake"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ ;\[]", requirement, maxsplit=1)[0].strip().lower()


def runtime_requirements(pyproject: Path) -> tuple[list[str], list[str]]:
    """(installed normally, installed without dependencies): the package's dependencies
    minus what Spark provides."""
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    kept = [d for d in dependencies if _name(d) not in _PROVIDED]
    return [d for d in kept if _name(d) not in _NO_DEPS], [d for d in kept if _name(d) in _NO_DEPS]


def _pip(python: Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args], check=True)


def _pip_uninstall(python: Path, *names: str) -> None:
    subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", *names], check=True)


def _import_as_spark_would(python: Path) -> None:
    """Imports the driver's modules with pyspark from Spark's own zips, as spark-submit arranges."""
    import pyspark

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    path = ":".join(str(z) for z in sorted(lib.glob("*.zip")))
    modules = "dr_stream.cli, dr_stream.replication.flow, confluent_kafka, yaml, delta"
    env = {"PYTHONPATH": path, "PATH": "/usr/bin:/bin"}
    subprocess.run([str(python), "-c", f"import {modules}"], check=True, env=env)


def build(dest: Path) -> None:
    root = project_root()
    staging = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    normal, no_deps = runtime_requirements(root / "pyproject.toml")
    (staging / "requirements.txt").write_text("".join(f"{r}\n" for r in normal))
    (staging / "requirements-no-deps.txt").write_text("".join(f"{r}\n" for r in no_deps))
    print("dist: building the wheel ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "-w", str(staging), str(root)], check=True)
    shutil.rmtree(root / "build", ignore_errors=True)  # setuptools' scratch space in the checkout
    wheel = next(staging.glob("dr_stream-*.whl"))
    (staging / "jars").mkdir()
    for jar in spark_jars():
        shutil.copy2(jar, staging / "jars" / jar.name)
    shutil.copy2(root / "jobs" / "replicate.py", staging / "replicate.py")

    print("dist: building the driver's Python environment ...", file=sys.stderr, flush=True)
    env = staging / "pyenv"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    python = env / "bin" / "python"
    (staging / "requirements-driver.txt").write_text(
        "".join(f"{r}\n" for r in normal if _name(r) not in _COMMANDS_ONLY))
    _pip(python, "-r", str(staging / "requirements-driver.txt"))
    _pip(python, "--no-deps", "-r", str(staging / "requirements-no-deps.txt"), str(wheel))
    _pip_uninstall(python, "pip", "setuptools")  # build tools; the driver never installs anything
    _import_as_spark_would(python)
    with tarfile.open(staging / "pyenv.tar.gz", "w:gz", compresslevel=1) as tar:
        for item in sorted(env.iterdir()):
            tar.add(item, arcname=item.name)  # symlinks stay links: bin/python -> the interpreter
    shutil.rmtree(env)
    (staging / "requirements-driver.txt").unlink()
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    size = (dest / "pyenv.tar.gz").stat().st_size / 2**20
    print(f"dist: {dest} (pyenv.tar.gz {size:.0f} MiB)", file=sys.stderr)


def dist_dir() -> Path:
    return cache_dir() / "dist"


if __name__ == "__main__":
    build(dist_dir())
