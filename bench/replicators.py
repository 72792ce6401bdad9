"""The two replicators as processes the bench starts, measures and stops by PID.

Cost is measured on the whole process tree (dr-stream: the Python driver and its Spark JVM;
MirrorMaker 2: one JVM): peak resident memory, sampled every 0.5 s (a child that has not yet
replaced its parent's program shares its memory and is not counted again), and CPU-seconds,
the sum of user and system time of every process in the tree at its last sample.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from dr_stream.runtime.jvm import kafka_classpath
from dr_stream.runtime.paths import project_root

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _children(pid: int) -> list[int]:
    try:
        tasks = Path(f"/proc/{pid}/task").iterdir()
        return [int(c) for t in tasks for c in (t / "children").read_text().split()]
    except OSError:
        return []


def process_tree(pid: int) -> list[int]:
    return [p for p, _ in _parented_tree(pid)]


def _parented_tree(pid: int) -> list[tuple[int, int | None]]:
    """(pid, its parent in the tree) for the process and all its descendants."""
    out: list[tuple[int, int | None]] = []
    todo: list[tuple[int, int | None]] = [(pid, None)]
    while todo:
        p, parent = todo.pop()
        out.append((p, parent))
        todo.extend((c, p) for c in _children(p))
    return out


Image = tuple[str, bytes]


def _image(pid: int) -> Image | None:
    """The program a process runs: its executable and command line (None once it is gone)."""
    try:
        return os.readlink(f"/proc/{pid}/exe"), Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None


def resident_counted(tree: list[tuple[int, int | None]], images: dict[int, Image | None]) -> list[int]:
    """The processes whose resident memory is their own. A child still running its parent's
    program is a fork that has not executed its own yet: a JVM starts every child process
    (Hadoop's `chmod` for a local checkpoint file, among others) by cloning itself first, and
    until the clone replaces its program it shares the parent's pages, so its resident size is
    the parent's counted a second time (a 2.5 GB JVM read as 5 GB in one sample)."""
    return [p for p, parent in tree
            if parent is None or images.get(p) is None or images.get(p) != images.get(parent)]


def _usage(pid: int) -> tuple[int, float] | None:
    """(resident bytes, CPU-seconds) of one process, or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        rss_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return rss_pages * _PAGE, (int(fields[11]) + int(fields[12])) / _TICKS


@dataclass
class CostSampler:
    """Samples a process tree until stopped."""

    pid: int
    every_s: float = 0.5
    peak_rss: int = 0
    rss: int = 0  # at the last sample
    cpu: dict[int, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> CostSampler:
        threading.Thread(target=self._run, daemon=True, name=f"cost-{self.pid}").start()
        return self

    def sample(self) -> None:
        rss = 0
        tree = _parented_tree(self.pid)
        own = set(resident_counted(tree, {p: _image(p) for p, _ in tree}))
        for p, _ in tree:
            usage = _usage(p)
            if usage:
                rss += usage[0] if p in own else 0
                self.cpu[p] = max(self.cpu.get(p, 0.0), usage[1])
        self.rss = rss
        self.peak_rss = max(self.peak_rss, rss)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self.sample()
        self._stop.set()

    @property
    def cpu_seconds(self) -> float:
        return sum(self.cpu.values())


@dataclass
class Replicator:
    """A replicator process: started with its own log file, stopped by its PID."""

    name: str
    command: list[str]
    env: dict[str, str]
    log_file: Path
    # The CPUs the process tree may run on (every child inherits them); None: the whole machine.
    cpus: frozenset[int] | None = None
    started_at: float = 0.0
    _proc: subprocess.Popen[bytes] | None = None
    _cost: CostSampler | None = None

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        """The replicator's process, once `start` ran."""
        if self._proc is None:
            raise RuntimeError(f"{self.name}: not started")
        return self._proc

    @property
    def cost(self) -> CostSampler:
        """The sampler of the process tree's CPU and memory, once `start` ran."""
        if self._cost is None:
            raise RuntimeError(f"{self.name}: not started")
        return self._cost

    def start(self) -> None:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        cpus = self.cpus
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus is not None else None
        with open(self.log_file, "ab") as log:
            self._proc = subprocess.Popen(self.command, env={**os.environ, **self.env}, stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True, cwd=project_root(), preexec_fn=pin)
        self.started_at = time.monotonic()
        self._cost = CostSampler(self._proc.pid).start()

    def check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see {self.log_file}")

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (both stop cleanly on it), SIGKILL to the tree after `timeout`."""
        if self._proc is None or self._proc.poll() is not None:
            return
        self.cost.stop()
        tree = process_tree(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill(tree)
            self.proc.wait(10)
        _kill(tree[1:])  # a child the parent left behind (a JVM) must not outlive the bench

    def kill9(self) -> None:
        """SIGKILL to the whole tree at once, as a crash would end it."""
        self.cost.stop()
        _kill(process_tree(self.proc.pid))
        self.proc.wait(30)


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def dr_stream(config: Path, env: dict[str, str], log_file: Path) -> Replicator:
    python = project_root() / ".venv" / "bin" / "python"
    return Replicator("dr-stream", [str(python), "-m", "dr_stream.cli", "run", "--config", str(config)],
                      env, log_file)


def plain_spark(env: dict[str, str], log_file: Path) -> Replicator:
    python = project_root() / ".venv" / "bin" / "python"
    return Replicator("plain Spark", [str(python), "-m", "bench.plain_spark"], env, log_file)


def mirror_maker(properties: Path, log_file: Path, heap: str = "2G", jvm_options: list[str] | None = None,
                 compat: bool = False) -> Replicator:
    """MirrorMaker 2 at the brokers' version, or (`compat`) at the 3.x version the compatibility
    brokers run, to see what a newer MirrorMaker 2 does cheaper on the same clusters."""
    # Heap as in Kafka's connect-mirror-maker.sh; the driver of dr-stream gets 2g too.
    # Its own log4j configuration writes INFO to the log file: without one, Kafka's jars log nothing.
    logging = [f"-Dlog4j2.configurationFile={project_root() / 'bench' / 'mm2-log4j2.properties'}",
               f"-Dbench.mm2.log={log_file}"]
    command = ["java", "-Xms256M", f"-Xmx{heap}", "-XX:+UseG1GC", *(jvm_options or []), *logging,
               "-cp", kafka_classpath(compat),
               "org.apache.kafka.connect.mirror.MirrorMaker", str(properties)]
    return Replicator("MirrorMaker 2", command, {}, log_file)
