"""Processes the dev tools start (brokers, the Hadoop cluster), tracked by the PID file written
when each was started, and whether something answers on a loopback port they listen on.
Invariant: only that PID is ever signalled, never a process found by name.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path


def loopback_listening(port: int, timeout_s: float = 1.0) -> bool:
    """Whether something on this machine's 127.0.0.1 accepts a connection on `port`."""
    with socket.socket() as probe:
        probe.settimeout(timeout_s)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def running_pid(pid_file: Path) -> int | None:
    """The PID in `pid_file` when that process is alive, else None."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        # Reap it if it is our own child: a dead child stays a zombie that kill(pid, 0) still finds.
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return None
    except ChildProcessError:
        pass  # started by another process (an earlier `dev up`)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


def stop_pid(pid_file: Path, timeout: float) -> bool:
    """SIGTERM the recorded process, SIGKILL after `timeout`; False when it was not running."""
    return bool(stop_pids([pid_file], timeout))


def stop_pids(pid_files: list[Path], timeout: float) -> int:
    """SIGTERM every recorded process at once, SIGKILL those still alive after `timeout`; how many
    were running. At once, because the nodes of one KRaft quorum stopped one after the other wait
    for a controller that the earlier ones took away."""
    pids = {f: running_pid(f) for f in pid_files}
    for pid_file, pid in pids.items():
        if pid is None:
            pid_file.unlink(missing_ok=True)
        else:
            os.kill(pid, signal.SIGTERM)
    running = [f for f, pid in pids.items() if pid is not None]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(running_pid(f) is not None for f in running):
        time.sleep(0.2)
    for pid_file in running:
        pid = running_pid(pid_file)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            while running_pid(pid_file) is not None:
                time.sleep(0.1)
        pid_file.unlink(missing_ok=True)
    return len(running)
