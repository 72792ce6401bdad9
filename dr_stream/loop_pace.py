"""How long a control loop waits between rounds, and what it last cost.

Each driver loop (group poller, topic sync, lag sampler) runs rounds one after another, so two
rounds never overlap. A round that takes longer as the cluster grows must not also come more
often than the cluster can serve it: the wait after a round is at least `interval_s` and at
least as long as the round itself, so a loop spends at most half its time at work and its
requests at most halve the cluster's spare capacity, whatever the count of topics or groups.

Invariants: `wait_s() >= interval_s`; `wait_s() >= last_round_s`; the period (round plus wait)
is what the loop reports next to the round's duration.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LoopPace:
    interval_s: float
    last_round_s: float = 0.0

    def done(self, round_s: float) -> float:
        """Records a round's duration; returns the wait before the next."""
        self.last_round_s = max(0.0, round_s)
        return self.wait_s()

    def wait_s(self) -> float:
        return max(self.interval_s, self.last_round_s)

    @property
    def period_s(self) -> float:
        return self.last_round_s + self.wait_s()
