"""Whether a running flow is healthy: the rule behind `GET /healthz`.

Healthy when both clusters answered the last probe and every query of the flow is active and
made progress within the window. Progress is a completed micro-batch (or Spark's report that
a trigger found nothing new), a run the sink published, or a lag sample that found nothing to
copy: a real-time batch reports to Spark only when it ends, minutes apart, so the copy itself
is the evidence. A query that started less than a window ago counts its start as progress.

Invariant: the rule is pure; every reason for 503 names the query or cluster it is about.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class QueryState:
    name: str
    active: bool
    # monotonic seconds of the latest evidence of progress (or of the start); None: never started
    progressed_at: float | None


@dataclass(frozen=True)
class Health:
    ok: bool
    reasons: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"status": "ok" if self.ok else "unhealthy", "reasons": list(self.reasons)}


def judge(now: float, queries: list[QueryState], unreachable: list[str], window_s: float) -> Health:
    reasons = [f"cluster {alias} does not answer" for alias in unreachable]
    if not queries:
        reasons.append("no query started yet")
    for q in queries:
        if not q.active:
            reasons.append(f"query {q.name} is not active")
        elif q.progressed_at is None or now - q.progressed_at > window_s:
            idle = "never" if q.progressed_at is None else f"{now - q.progressed_at:.0f} s ago"
            reasons.append(f"query {q.name} made no progress within {window_s:g} s (last: {idle})")
    return Health(not reasons, tuple(reasons))
