"""`docs/reference/metrics.md`, written from the metric families a flow's `/metrics` serves.

The families come from `FlowMetrics.collect` itself (a drill and an ACL sync pass are told first, so the families that
appear only after one are listed too): name, type, labels and help, as a scrape shows them.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client.core import Metric

from dr_stream.replication.flow_metrics import FlowMetrics

OUT = Path(__file__).resolve().parent.parent / "docs" / "reference" / "metrics.md"


def _families() -> list[Metric]:
    metrics = FlowMetrics("FLOW", "replicate-FLOW")
    metrics.drilled(True, {})
    metrics.acls_synced(0, 0, {})
    return list(metrics.collect())


def _row(family: Metric) -> str:
    name = family.name + ("_total" if family.type == "counter" else "")
    labels = ", ".join(f"`{label}`" for label in getattr(family, "_labelnames", ()))
    return f"| `{name}` | {family.type} | {labels} | {' '.join(family.documentation.split())} |"


def render() -> str:
    return "\n".join([
        "# dr-stream metrics reference", "",
        "Generated from the metric families a running flow serves on `/metrics` "
        "(`dr_stream/replication/flow_metrics.py`) by `python -m tools.references`; a test keeps it equal "
        "to the code. Every series carries the `flow` label; counters start at 0 when the process starts. "
        "How to read them, and the alert rules built on them: [Operating a flow](../operating.md).", "",
        "| metric | type | labels | what |", "|---|---|---|---|",
        *(_row(f) for f in _families()), "",
    ])
