"""Bench results: one markdown table with both replicators side by side, and one PNG.

The ratio column is dr-stream / MirrorMaker 2, with the direction that is better stated per row,
so a reader never has to guess whether 0.5 is good.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from bench.failover_time import FailoverTimes
from bench.workloads import CatchUp, GroupOutcome, Size, percentile

DR, MM2 = "dr-stream", "MirrorMaker 2"


@dataclass
class ToolResult:
    name: str
    catch_up: CatchUp | None = None
    latencies: list[float] = field(default_factory=list)
    sent: int = 0
    groups: list[GroupOutcome] = field(default_factory=list)
    peak_rss: int = 0
    cpu_seconds: float = 0.0
    settings: str = ""
    failover: FailoverTimes | None = None


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)) or not b:
        return "-"
    return f"{a / b:.2f}"


def _num(v: float | None, fmt: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, fmt)


def _yes(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "no"


def rows(dr: ToolResult, mm: ToolResult) -> list[tuple[str, str, str, str, str]]:
    """(metric, dr-stream, MM2, ratio, better) rows."""
    out = []

    def add(metric, a, b, fmt, better):
        out.append((metric, _num(a, fmt), _num(b, fmt), _ratio(a, b), better))

    if dr.catch_up and mm.catch_up:
        add("catch-up: seconds from start until every record is on the destination",
            dr.catch_up.seconds_from_start, mm.catch_up.seconds_from_start, ".1f", "lower")
        add("catch-up: records/s while copying", dr.catch_up.records_per_s, mm.catch_up.records_per_s, ",.0f",
            "higher")
        add("catch-up: MB/s while copying", dr.catch_up.mb_per_s, mm.catch_up.mb_per_s, ".1f", "higher")
    for q in (50, 95, 99):
        add(f"steady: end-to-end latency p{q} (ms)", percentile(dr.latencies, q), percentile(mm.latencies, q),
            ",.0f", "lower")
    add("steady: records received", len(dr.latencies), len(mm.latencies), ",d", "equal to sent")
    by_lag = {g.lag: g for g in mm.groups}
    for g in dr.groups:
        m = by_lag.get(g.lag)
        label = "at the head" if g.lag == 0 else f"{g.lag:,} behind"
        add(f"failover, group {label}: records re-read", g.reread, m.reread if m else None, ",d", "lower (0)")
        add(f"failover, group {label}: records skipped", g.skipped, m.skipped if m else None, ",d", "lower (0)")
        add(f"failover, group {label}: seconds from the commit until the final offset is live", g.sync_seconds,
            m.sync_seconds if m else None, ".2f", "lower")
        out.append((f"failover, group {label}: first synced offset was the final one", _yes(g.first_was_final),
                    _yes(m.first_was_final if m else None), "-", "yes"))
    if dr.failover is not None:
        f = dr.failover
        add("failover with the source gone: wall seconds, 1 group", f.one_group_s, None, ".2f", "lower")
        add(f"failover with the source gone: wall seconds, {f.groups:,} groups x {f.partitions} partitions",
            f.all_groups_s, None, ".2f", "lower")
        add("offset index: bytes per million replicated records", f.index_bytes_per_million, None, ",.0f", "lower")
    add("cost: peak RSS (MiB)", dr.peak_rss / 2**20, mm.peak_rss / 2**20, ",.0f", "lower")
    add("cost: CPU-seconds for the whole run", dr.cpu_seconds, mm.cpu_seconds, ",.0f", "lower")
    return out


def markdown(dr: ToolResult, mm: ToolResult, size: Size, when: str, machine: str, png: str) -> str:
    lines = [
        f"# dr-stream vs MirrorMaker 2: {when}",
        "",
        f"Same clusters, same run, one replicator at a time ({machine}). Catch-up: {size.records:,} records of "
        f"{size.record_bytes} B on {size.partitions} partitions, keyed, two headers, loaded before the replicator "
        f"starts. Steady: {size.steady_rate:,} records/s for {size.steady_seconds} s, latency measured by a "
        f"consumer on the destination from the send time in each record. Failover: one group per lag "
        f"({', '.join(f'{lag:,}' for lag in size.lags)} records behind the head of a {size.lag_records:,}-record "
        "partition) commits on the source a few seconds into the steady load; each resumes on the destination at "
        "the offset the replicator synced. Failover timing (dr-stream only): `dr-stream failover` with the "
        "source's address pointing nowhere, for one group and for 1,000 groups on 10 partitions each.",
        "",
        f"| metric | {DR} | {MM2} | ratio {DR} / {MM2} | better |",
        "|---|---:|---:|---:|---|",
    ]
    lines += [f"| {m} | {a} | {b} | {r} | {better} |" for m, a, b, r, better in rows(dr, mm)]
    lines += ["", f"![latency CDF and throughput]({png})", "", "Settings:", "",
              f"- {DR}: {dr.settings}", f"- {MM2}: {mm.settings}", ""]
    return "\n".join(lines)


def plot(dr: ToolResult, mm: ToolResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (cdf, bars) = plt.subplots(1, 2, figsize=(12, 4.5))
    for result, color in ((dr, "tab:blue"), (mm, "tab:orange")):
        if result.latencies:
            ordered = sorted(result.latencies)
            n = len(ordered)
            cdf.plot(ordered, [(i + 1) / n for i in range(n)], label=result.name, color=color)
    cdf.set_xscale("log")
    cdf.set_xlabel("end-to-end latency (ms, log scale)")
    cdf.set_ylabel("fraction of records")
    cdf.set_title("steady load: latency CDF")
    cdf.grid(True, which="both", alpha=0.3)
    cdf.legend()
    rates = [r.catch_up.records_per_s if r.catch_up else 0 for r in (dr, mm)]
    drawn = bars.bar([dr.name, mm.name], rates, color=["tab:blue", "tab:orange"])
    bars.bar_label(drawn, labels=[f"{r:,.0f}" for r in rates])
    bars.set_ylabel("records/s")
    bars.set_title("catch-up throughput")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
