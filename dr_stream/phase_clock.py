"""Where a start-up's time went, phase by phase.

A flow's restart after a crash is time in which nothing is copied; an operator who sees 30 s
wants to know whether Spark, the clusters, the offset index or the first batch took it. The
flow marks the end of each phase as it goes and prints one line once its query runs.

Invariants: the phases' seconds add up to the total; each phase is the time since the
previous mark (or the clock's start).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class PhaseClock:
    now: Callable[[], float] = time.monotonic
    phases: list[tuple[str, float]] = field(default_factory=list)
    _began: float = field(init=False)
    _last: float = field(init=False)

    def __post_init__(self) -> None:
        self._began = self._last = self.now()

    def mark(self, phase: str) -> None:
        """The phase named `phase` ends now."""
        at = self.now()
        self.phases.append((phase, at - self._last))
        self._last = at

    @property
    def total_s(self) -> float:
        return self._last - self._began

    def shown(self) -> str:
        """'12.3 s (spark session 6.0 s, clusters 0.3 s, ...)'."""
        parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.phases)
        return f"{self.total_s:.1f} s ({parts})"
