"""Where a replicator's CPU goes in each phase of a bench run: `make profile`'s measuring shell.

Two sources, joined per OS thread:

* the exact CPU time of every thread of the replicator's process tree, read from /proc at each
  phase boundary (a thread's user + system time; what ended threads used is the process's
  total less its living threads');
* samples of what each thread was doing: Java Flight Recorder's execution samples in the JVM
  (Spark's, or MirrorMaker 2's), py-spy's in dr-stream's Python driver (non-blocking, so the
  driver is never paused), restarted at each boundary.

A thread's CPU time is split over the components its samples fall in (bench/cpu_components.py);
a thread with CPU time and no sample (the JVM's collectors and compilers, librdkafka's threads)
counts whole under its own name. The result, per phase, is CPU-seconds per component, whose sum
is the process tree's CPU-seconds in that phase.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from bench.cpu_components import jvm_component, native_component, python_component
from bench.replicators import Replicator, process_tree
from dr_stream.runtime.paths import project_root

_TICKS = os.sysconf("SC_CLK_TCK")
JFR_OPTIONS = "-XX:StartFlightRecording=name=profile,settings=profile -XX:FlightRecorderOptions=stackdepth=512"
PY_SPY_RATE = 100
ENDED = "threads that ended in the phase"


@dataclass(frozen=True)
class ThreadTime:
    process: str  # "jvm" or "python"
    name: str  # the OS thread name (15 characters at most)
    cpu_s: float


Threads = dict[tuple[int, int], ThreadTime]  # (pid, tid) -> its time so far
Processes = dict[int, tuple[str, float]]  # pid -> (kind, CPU-seconds so far, ended threads included)


def _cpu(stat: str) -> float:
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _kind(pid: int) -> str:
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return "gone"
    return "jvm" if exe.endswith("/java") else "python" if "python" in exe else Path(exe).name


def snapshot(root: int) -> tuple[Threads, Processes]:
    threads: Threads = {}
    processes: Processes = {}
    for pid in process_tree(root):
        kind = _kind(pid)
        try:
            processes[pid] = (kind, _cpu(Path(f"/proc/{pid}/stat").read_text()))
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                name = (task / "comm").read_text().strip()
                threads[(pid, int(task.name))] = ThreadTime(kind, name, _cpu((task / "stat").read_text()))
            except (OSError, ValueError):
                continue
    return threads, processes


CpuSeconds = dict[str, float]  # component -> CPU-seconds
Sampled = dict[int, Counter[tuple[str, tuple[str, ...]]]]  # tid -> (thread name, root-first stack) -> samples


def read_folded(lines: list[str]) -> Sampled:
    """JfrStacks' lines: "tid TAB thread TAB root;...;leaf TAB samples"."""
    out: Sampled = {}
    for line in lines:
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 4:
            continue
        tid, thread, stack, count = parts
        out.setdefault(int(tid), Counter())[(thread, tuple(stack.split(";")))] += int(count)
    return out


_PY_SPY_THREAD = re.compile(r"^thread \((\d+)\): ?(.*)$")


def read_py_spy(lines: list[str]) -> Sampled:
    """py-spy's raw lines with --threads: "thread (tid): name;root;...;leaf samples"."""
    out: Sampled = {}
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        head, *frames = stack.split(";")
        found = _PY_SPY_THREAD.match(head)
        if not found or not count.isdigit():
            continue
        out.setdefault(int(found.group(1)), Counter())[(found.group(2) or "?", tuple(frames))] += int(count)
    return out


def attribute(before: tuple[Threads, Processes], after: tuple[Threads, Processes], sampled: Sampled
              ) -> CpuSeconds:
    """CPU-seconds per component over the phase from `before` to `after` (pure: the rule of the module doc)."""
    out: defaultdict[str, float] = defaultdict(float)
    threads_before, processes_before = before
    threads_after, processes_after = after
    living: defaultdict[int, float] = defaultdict(float)
    for (pid, tid), now in threads_after.items():
        was = threads_before.get((pid, tid))
        spent = now.cpu_s - (was.cpu_s if was else 0.0)
        living[pid] += spent
        if spent <= 0:
            continue
        samples = sampled.get(tid)
        if not samples:
            out[native_component(now.name) if now.process == "jvm" or now.name.startswith("rdk:")
                else f"driver: unsampled ({now.name})"] += spent
            continue
        total = sum(samples.values())
        for (thread, stack), n in samples.items():
            component = (jvm_component(thread, list(stack)) if now.process == "jvm"
                         else python_component(thread, list(stack)))
            out[component] += spent * n / total
    for pid, (kind, cpu) in processes_after.items():
        ended = cpu - processes_before.get(pid, (kind, 0.0))[1] - living[pid]
        if ended > 0.05:
            out[f"{kind}: {ENDED}"] += ended
    return dict(out)


@dataclass
class Phase:
    name: str
    began: float  # epoch seconds
    before: tuple[Threads, Processes]
    ended: float = 0.0
    after: tuple[Threads, Processes] | None = None
    py_spy: Path | None = None

    @property
    def seconds(self) -> float:
        return self.ended - self.began


def replicator_jvm(replicator: Replicator) -> int | None:
    """The JVM doing a replicator's work: Spark's driver (not the launcher that starts it), or
    MirrorMaker 2's."""
    for pid in process_tree(replicator.proc.pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if _kind(pid) == "jvm" and b"org.apache.spark.launcher.Main" not in command:
            return pid
    return None


def dump_flight_recording(replicator: Replicator, into: Path) -> None:
    """Writes the replicator JVM's recording (started with `JFR_OPTIONS`) now: at its stop the
    JVM may not live long enough to write it itself."""
    jvm = replicator_jvm(replicator)
    if jvm is not None:
        subprocess.run(["jcmd", str(jvm), "JFR.dump", "name=profile", f"filename={into}"],
                       check=True, capture_output=True, timeout=120)


@dataclass
class Profiler:
    """Attached to one replicator's run: `mark` begins each named phase (ending the last),
    `finish` ends the last, writes the flight recording out and folds every phase's samples."""

    tool: str
    out: Path
    phases: list[Phase] = field(default_factory=list)
    _replicator: Replicator | None = None
    _spy: subprocess.Popen[bytes] | None = None

    def started(self, replicator: Replicator) -> None:
        self._replicator = replicator
        self.out.mkdir(parents=True, exist_ok=True)

    @property
    def replicator(self) -> Replicator:
        """What is profiled, once `started` was told."""
        if self._replicator is None:
            raise RuntimeError(f"{self.tool}: profiler not started")
        return self._replicator

    def mark(self, phase: str) -> None:
        self._end_phase()
        now = snapshot(self.replicator.proc.pid)
        self.phases.append(Phase(phase, time.time(), now))
        if self._python_pid() is not None:
            self.phases[-1].py_spy = self.out / f"{phase}.py-spy.txt"
            self._spy = subprocess.Popen(
                [str(project_root() / ".venv" / "bin" / "py-spy"), "record", "-p", str(self._python_pid()),
                 "--threads", "--nonblocking", "-r", str(PY_SPY_RATE), "-f", "raw", "-o", str(self.phases[-1].py_spy)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)

    def _python_pid(self) -> int | None:
        return self.replicator.proc.pid if _kind(self.replicator.proc.pid) == "python" else None

    def _end_phase(self) -> None:
        if not self.phases or self.phases[-1].after is not None:
            return
        phase = self.phases[-1]
        phase.after, phase.ended = snapshot(self.replicator.proc.pid), time.time()
        if self._spy is not None:
            self._spy.send_signal(signal.SIGINT)
            try:
                self._spy.wait(30)
            except subprocess.TimeoutExpired:
                self._spy.kill()
                self._spy.wait(10)
            self._spy = None

    def stopping(self) -> None:
        """Before the replicator stops: the last phase ends and the recording is written."""
        self._end_phase()
        dump_flight_recording(self.replicator, self.recording)

    @property
    def recording(self) -> Path:
        return self.out / "recording.jfr"

    def samples(self) -> dict[str, tuple[Sampled, Sampled]]:
        """Each phase's (JVM samples, Python samples)."""
        jvm: dict[str, Sampled] = {}
        if self.recording.exists():
            windows = [f"{p.name}={int(p.began * 1000)}:{int(p.ended * 1000)}" for p in self.phases]
            subprocess.run(["java", str(Path(__file__).with_name("JfrStacks.java")), str(self.recording),
                            str(self.out), *windows], check=True, capture_output=True, timeout=600)
            for p in self.phases:
                jvm[p.name] = read_folded((self.out / f"{p.name}.folded").read_text().splitlines())
        python = {p.name: read_py_spy(p.py_spy.read_text().splitlines()) if p.py_spy and p.py_spy.exists() else {}
                  for p in self.phases}
        return {p.name: (jvm.get(p.name, {}), python[p.name]) for p in self.phases}
