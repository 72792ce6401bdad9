"""`dr-stream status --plot FILE.png`: the flow's lag over the recent past, per topic.

Drawn from the lag history topic (`replication.lag_history`): what the running flow measured,
not what can be reconstructed now. Two panels sharing the time axis: records not copied yet
(summed over a topic's partitions) and seconds behind (its most behind partition). A gap in a
line is a time the flow was not running or could not measure.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from dr_stream.replication.lag_history import LagSample


def series(samples: list[LagSample]) -> dict[str, dict[str, list[tuple[datetime, float]]]]:
    """{"records" | "seconds": {topic: [(time, value)]}}; an unknown value is NaN, so its line
    breaks there instead of joining the known points around it. A topic never known is left out."""
    out: dict[str, dict[str, list[tuple[datetime, float]]]] = {"records": {}, "seconds": {}}
    for sample in samples:
        at = datetime.fromtimestamp(sample.at_ms / 1000, UTC)
        for topic, (records, seconds) in sorted(sample.topics.items()):
            out["records"].setdefault(topic, []).append((at, float(records)))
            out["seconds"].setdefault(topic, []).append((at, math.nan if seconds is None else seconds))
    return {kind: {t: points for t, points in lines.items() if any(not math.isnan(v) for _, v in points)}
            for kind, lines in out.items()}


def draw_lag(samples: list[LagSample], path: str, flow: str) -> dict[str, list[str]]:
    """Writes the PNG; returns the topics drawn in each panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = series(samples)
    fig, (records, seconds) = plt.subplots(2, 1, figsize=(11, 6.5), sharex=True)
    for axis, kind, label in ((records, "records", "records not copied yet"),
                              (seconds, "seconds", "seconds behind (oldest waiting record)")):
        for topic, points in lines[kind].items():
            axis.plot([t for t, _ in points], [v for _, v in points], label=topic, linewidth=1.2)
        axis.set_ylabel(label)
        axis.grid(True, alpha=0.3)
        if lines[kind]:
            axis.legend(loc="upper left", fontsize="small")
    records.set_title(f"flow {flow}: replication lag per topic ({len(samples)} samples)")
    seconds.set_xlabel("time (UTC)")
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return {kind: sorted(topics) for kind, topics in lines.items()}
