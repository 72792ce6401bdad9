"""What dr-stream waited for while a cluster settled: recorded by every retry, said once.

A command retries each retriable error where it meets it (`retrying_clients`), often many
requests at once after one broker restart. The operator needs one line per cluster, not one per
request: which errors the cluster answered, how many requests were sent again, for how long,
and whether it settled. `Waits` gathers those from every thread; `lines` says them and starts
afresh, so a command says its waits once when it ends and a flow says its own every so often;
`totals` counts every request sent again since the process started (a flow's metric).

Invariants: recording is thread-safe and never raises; `lines` returns each wait once; totals
only grow, one series per cluster and error name (a few dozen names at most).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class _Wait:
    errors: dict[str, int] = field(default_factory=dict)  # error name -> retries
    calls: set[str] = field(default_factory=set)
    first: float = 0.0
    last: float = 0.0
    gave_up: int = 0


class Waits:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._by_cluster: dict[str, _Wait] = {}
        self._totals: dict[tuple[str, str], int] = {}  # (cluster, error) -> retries, never reset

    def retried(self, cluster: str, call: str, error: str) -> None:
        """A request of `call` to `cluster` answered `error` and is sent again."""
        now = self.clock()
        with self._lock:
            wait = self._by_cluster.setdefault(cluster, _Wait(first=now))
            wait.errors[error] = wait.errors.get(error, 0) + 1
            wait.calls.add(call)
            wait.last = now
            self._totals[(cluster, error)] = self._totals.get((cluster, error), 0) + 1

    def gave_up(self, cluster: str) -> None:
        """A retried request ran out of time with the error still there."""
        with self._lock:
            if cluster in self._by_cluster:
                self._by_cluster[cluster].gave_up += 1

    def totals(self) -> dict[tuple[str, str], int]:
        """Requests sent again since the process started, per (cluster, error): a counter."""
        with self._lock:
            return dict(self._totals)

    def lines(self) -> list[str]:
        """One line per cluster waited for since the last call."""
        with self._lock:
            found, self._by_cluster = self._by_cluster, {}
        return [_line(cluster, wait) for cluster, wait in sorted(found.items())]


def _line(cluster: str, wait: _Wait) -> str:
    retries = sum(wait.errors.values())
    errors = ", ".join(f"{name}" + (f" x{n}" if n > 1 else "")
                       for name, n in sorted(wait.errors.items(), key=lambda e: -e[1]))
    span = wait.last - wait.first
    over = f" over {span:.1f} s" if span >= 0.1 else ""
    ending = (f"; {wait.gave_up} still failing when their time ran out" if wait.gave_up else "; it settled")
    return (f"{cluster} was settling (a broker restarting or leadership moving): {retries} request(s) sent again"
            f"{over} after {errors} ({', '.join(sorted(wait.calls))}){ending}")


# The process's one record: every client built by `kafka.clients` reports here.
WAITS = Waits()
