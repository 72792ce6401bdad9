"""The single-file Java programs of `tests/jvm_probes/`: Kafka's own clients (a group member, a
share consumer, a Streams application) at the brokers' version, and a Flink job on Flink's own
Kafka source, run beside the flow as its users."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PROBES = Path(__file__).resolve().parent / "jvm_probes"


def probe(name: str, classpath: str, *args: str) -> list[str]:
    """The command line of probe `name` (`tests/jvm_probes/<name>.java`) on `classpath`."""
    java = shutil.which("java")
    assert java is not None
    return [java, "-cp", classpath, str(PROBES / f"{name}.java"), *args]


def flink_classpath() -> str:
    """Flink 2's mini-cluster, its Kafka source and their Kafka client (`make setup` fetches them)."""
    from dr_stream.runtime.jvm import jar_dir

    jars = sorted(jar_dir("flink").glob("*.jar"))
    assert jars, f"no jars in {jar_dir('flink')}: run `make setup` first"
    return ":".join(str(j) for j in jars)


def run_probe(command: list[str]) -> list[str]:
    """Runs a probe to its end; the lines it printed (logging's aside). It must succeed."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if line and not line.startswith("SLF4J")]


@contextmanager
def staying(command: list[str]) -> Iterator[list[str]]:
    """A probe that runs until its stdin closes, for the block: yields the lines it prints as they
    come. At the end its stdin is closed (it leaves its group and ends), and it is killed by its
    PID if it has not ended a minute later."""
    running = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(line.strip() for line in running.stdout), daemon=True).start()
    try:
        yield lines
    finally:
        running.stdin.close()
        try:
            running.wait(timeout=60)
        except subprocess.TimeoutExpired:
            running.kill()
            running.wait(timeout=10)
