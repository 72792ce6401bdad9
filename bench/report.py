"""Bench results: one markdown table with every replicator side by side, and one PNG.

Each replicator runs N times (`BENCH_REPEAT`), alternating with the others; a cell is the
median of its N runs with their min-max in brackets, since on a 2-core machine two runs of
the same code differ by up to 2x. A ratio column is a dr-stream mode's median over MirrorMaker
2's median (with the min-max of run-by-run ratios), with the direction that is better stated
per row, so a reader never has to guess whether 0.5 is good.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from bench.failover_time import FailoverTimes
from bench.workloads import CatchUp, GroupOutcome, Size, percentile

DR, DR_RT, PLAIN, MM2 = "dr-stream", "dr-stream realtime", "plain Spark", "MirrorMaker 2"
# The plain Spark copy (bench/plain_spark.py) is the floor under dr-stream's record path: a ratio
# of dr-stream to it is what dr-stream adds, one of it to MirrorMaker 2 what Spark costs.
TOOLS = (DR, DR_RT, PLAIN, MM2)
COLORS = {DR: "tab:blue", DR_RT: "tab:green", PLAIN: "tab:gray", MM2: "tab:orange"}


@dataclass
class ToolResult:
    """One run of one replicator."""

    name: str
    catch_up: CatchUp | None = None
    latencies: list[float] = field(default_factory=list)
    sent: int = 0
    groups: list[GroupOutcome] = field(default_factory=list)
    peak_rss: int = 0
    cpu_seconds: float = 0.0
    catch_up_cpu_seconds: float | None = None  # the process tree's, first record copied -> all copied
    steady_cpu_seconds: float | None = None  # over the steady load
    settings: str = ""
    failover: FailoverTimes | None = None
    index_bytes_per_million: float | None = None

    def group(self, lag: int) -> GroupOutcome | None:
        return next((g for g in self.groups if g.lag == lag), None)


Runs = dict[str, list[ToolResult]]
Metric = Callable[[ToolResult], float | None]


def _num(v: float | None, fmt: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, fmt)


def _values(runs: list[ToolResult], metric: Metric) -> list[float]:
    out = []
    for r in runs:
        v = metric(r)
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            out.append(float(v))
    return out


def _cell(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    median = _num(statistics.median(values), fmt)
    if len(values) == 1:
        return median
    return f"{median} ({_num(min(values), fmt)}-{_num(max(values), fmt)})"


def _ratio(a: list[float], b: list[float]) -> str:
    """Median over median, then the min-max of the runs' own ratios (run i against run i, the
    two being neighbours in the alternation)."""
    if not a or not b or not statistics.median(b):
        return "-"
    shown = f"{statistics.median(a) / statistics.median(b):.2f}"
    pairs = [x / y for x, y in zip(a, b, strict=False) if y] if len(a) == len(b) > 1 else []
    return f"{shown} ({min(pairs):.2f}-{max(pairs):.2f})" if pairs else shown


def _records_per_cpu_s(result: ToolResult) -> float | None:
    if not result.catch_up or not result.catch_up_cpu_seconds:
        return None
    return result.catch_up.records / result.catch_up_cpu_seconds


def _latency(q: int, result: ToolResult) -> float | None:
    return percentile(result.latencies, q) if result.latencies else None


def _metrics(size: Size) -> list[tuple[str, Metric, str, str]]:
    """(label, value of one run, format, which direction is better)."""
    out: list[tuple[str, Metric, str, str]] = [
        ("catch-up: seconds from start until every record is on the destination",
         lambda r: r.catch_up.seconds_from_start if r.catch_up else None, ".1f", "lower"),
        ("catch-up: records/s while copying", lambda r: r.catch_up.records_per_s if r.catch_up else None, ",.0f",
         "higher"),
        ("catch-up: MB/s while copying", lambda r: r.catch_up.mb_per_s if r.catch_up else None, ".1f", "higher"),
        ("catch-up: records copied per CPU-second", _records_per_cpu_s, ",.0f", "higher"),
    ]
    for q in (50, 95, 99):
        out.append((f"steady: end-to-end latency p{q} (ms)", partial(_latency, q), ",.0f", "lower"))
    out.append(("steady: records received", lambda r: len(r.latencies), ",.0f", "equal to sent"))
    for lag in size.lags:
        label = "at the head" if lag == 0 else f"{lag:,} behind"

        def field_of(name: str, lag: int = lag) -> Metric:
            return lambda r: getattr(r.group(lag), name) if r.group(lag) else None

        out += [
            (f"failover, group {label}: records re-read", field_of("reread"), ",.0f", "lower (0)"),
            (f"failover, group {label}: records skipped", field_of("skipped"), ",.0f", "lower (0)"),
            (f"failover, group {label}: seconds from the commit until the final offset is live",
             field_of("sync_seconds"), ".2f", "lower"),
        ]
    out += [
        ("cost: peak RSS (MiB)", lambda r: r.peak_rss / 2**20, ",.0f", "lower"),
        ("cost: CPU-seconds for the whole run", lambda r: r.cpu_seconds, ",.0f", "lower"),
        ("cost: CPU-seconds over the steady load", lambda r: r.steady_cpu_seconds, ",.1f", "lower"),
    ]
    return out


def _final_row(runs: Runs, lag: int) -> list[str]:
    """'yes 3/3': how many runs synced the final offset first."""
    cells = []
    for tool in TOOLS:
        outcomes = [outcome.first_was_final for r in runs.get(tool, []) if (outcome := r.group(lag))]
        known = [o for o in outcomes if o is not None]
        cells.append("-" if not known else f"{'yes' if all(known) else 'no'} {sum(known)}/{len(known)}")
    return cells


# (numerator, denominator) of each ratio column, in the table's order.
RATIOS = ((DR, MM2), (DR_RT, MM2), (PLAIN, MM2), (DR, PLAIN))
RATIO_HEADERS = ("micro-batch / MM2", "realtime / MM2", "plain Spark / MM2 (Spark's share)",
                 "micro-batch / plain Spark (dr-stream's share)")


def _metric_row(runs: Runs, label: str, metric: Metric, fmt: str, better: str) -> list[str]:
    """[label, one cell per tool in TOOLS, one per ratio in RATIOS, better]."""
    per_tool = {tool: _values(runs.get(tool, []), metric) for tool in TOOLS}
    return [label, *(_cell(per_tool[t], fmt) for t in TOOLS), *(_ratio(per_tool[a], per_tool[b]) for a, b in RATIOS),
            better]


def rows(runs: Runs, size: Size) -> list[list[str]]:
    """[metric, one cell per tool in TOOLS, one per ratio in RATIOS, better] rows."""
    out = []
    blank = ["-"] * len(RATIOS)
    for label, metric, fmt, better in _metrics(size):
        out.append(_metric_row(runs, label, metric, fmt, better))
        if label.endswith("until the final offset is live"):
            lag = next(g for g in size.lags if label.startswith(
                f"failover, group {'at the head' if g == 0 else f'{g:,} behind'}:"))
            out.append([label.replace("seconds from the commit until the final offset is live",
                                      "first synced offset was the final one"),
                        *_final_row(runs, lag), *blank, "yes"])
    index = {t: _cell(_values(runs.get(t, []), lambda r: r.index_bytes_per_million), ",.0f") for t in TOOLS}
    out.append(["offset index: bytes per million replicated records", *index.values(), *blank, "lower"])
    failover = next((r.failover for r in runs.get(DR, []) if r.failover), None)
    if failover is not None:
        f = failover
        for label, value in (
                ("failover with the source gone: wall seconds, 1 group", f.one_group_s),
                (f"failover with the source gone: wall seconds, {f.groups:,} groups x {f.partitions} partitions",
                 f.all_groups_s)):
            out.append([label, _num(value, ".2f"), *["-"] * (len(TOOLS) - 1), *blank, "lower"])
    return out


def long_rows(long: dict[str, ToolResult]) -> list[list[str]]:
    """[metric, one cell per tool in TOOLS, one per ratio in RATIOS, better] rows of the long catch-up."""
    metrics: list[tuple[str, Metric, str, str]] = [
        ("records/s while copying", lambda r: r.catch_up.records_per_s if r.catch_up else None, ",.0f", "higher"),
        ("CPU-seconds, first record copied -> all copied", lambda r: r.catch_up_cpu_seconds, ",.1f", "lower"),
        ("records copied per CPU-second", _records_per_cpu_s, ",.0f", "higher"),
        ("peak RSS (MiB)", lambda r: r.peak_rss / 2**20, ",.0f", "lower"),
    ]
    runs = {tool: [result] for tool, result in long.items()}
    return [_metric_row(runs, label, metric, fmt, better) for label, metric, fmt, better in metrics]


def _table(first_column: str, body: list[list[str]]) -> list[str]:
    return ["| " + first_column + " | " + " | ".join(f"{DR} (micro-batch)" if t == DR else t for t in TOOLS) + " | "
            + " | ".join(f"ratio {h}" for h in RATIO_HEADERS) + " | better |",
            "|---|" + "---:|" * (len(TOOLS) + len(RATIOS)) + "---|",
            *("| " + " | ".join(row) + " |" for row in body)]


def markdown(runs: Runs, size: Size, when: str, machine: str, png: str,
             long: dict[str, ToolResult] | None = None, constrained: Runs | None = None,
             constrained_cores: str = "") -> str:
    """The report; `constrained`: the same rounds with every replicator on `constrained_cores`."""
    repeats = max((len(v) for v in runs.values()), default=0)
    lines = [
        f"# dr-stream vs plain Spark vs MirrorMaker 2: {when}",
        "",
        f"Same clusters, same run, one replicator at a time, each run {repeats} times in alternation ({machine}); "
        "a cell is the median of the runs with their min-max in brackets; a ratio is median over median, "
        "with the min-max of the run-by-run ratios. The destination cluster is new for "
        f"every run. Catch-up: {size.records:,} records of {size.record_bytes} B on {size.partitions} partitions, "
        f"keyed, two headers, loaded before the replicator starts. Steady: {size.steady_rate:,} records/s for "
        f"{size.steady_seconds} s, latency measured by a consumer on the destination from the send time in each "
        f"record. Failover: one group per lag ({', '.join(f'{lag:,}' for lag in size.lags)} records behind the head "
        f"of a {size.lag_records:,}-record partition) commits on the source a few seconds into the steady load; "
        "each resumes on the destination at the offset the replicator synced. Failover timing (dr-stream only, "
        "first run): `dr-stream failover` with the source's address pointing nowhere, for one group and for "
        "1,000 groups on 10 partitions each.",
        "",
        "The plain Spark copy (bench/plain_spark.py) is Spark's Kafka source written straight to its sink, "
        "nothing of dr-stream's: it copies no timestamp, adds no provenance, indexes and translates nothing, so "
        "it has no failover rows. Spark in it is tuned as dr-stream tunes it (the flow's JVM options, one task "
        "per core, asynchronous progress tracking). It is the floor under dr-stream's record path: "
        "`plain Spark / MM2` is what Spark costs, `micro-batch / plain Spark` what dr-stream adds.",
        "",
        *_table("metric", rows(runs, size)),
    ]
    if long:
        records = next(iter(long.values())).catch_up
        lines += ["", f"## Long catch-up: {records.records if records else size.long_records:,} records", "",
                  "The same source topic grown to this size (the records above, then more alike), each replicator "
                  "once, alone, from a new destination: long enough that each JVM's warm-up (class loading, the "
                  "JIT compilers) is a small part of the copy, as it is for a flow that runs for days. CPU-seconds "
                  "are the process tree's from the first record copied to the last.", "",
                  *_table("long catch-up", long_rows(long))]
    if constrained:
        repeats = max((len(v) for v in constrained.values()), default=0)
        lines += ["", f"## Constrained: each replicator on {constrained_cores}", "",
                  f"The same rounds, {repeats} times in alternation, with every process of the replicator's (its "
                  "JVMs, dr-stream's Python driver) allowed onto those cores only, as when the machine is busy "
                  "with something else; the brokers and the load keep every core. A JVM sizes its thread pools "
                  "and picks its collector from the CPUs it may use, so each replicator runs as it would in a "
                  "container of that size. The rows are the ones above: the ratios show how each degrades.", "",
                  *_table("constrained", rows(constrained, size))]
    lines += ["", f"![latency CDF and throughput]({png})", "", "Settings:", ""]
    lines += [f"- {tool}: {runs[tool][0].settings}" for tool in TOOLS if runs.get(tool)]
    return "\n".join([*lines, ""])


def plot(runs: Runs, path: Path, constrained: Runs | None = None) -> None:
    """Latency CDF per replicator (every run's records pooled; the constrained arm's dashed) and
    catch-up throughput (median, min-max as the error bar)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (cdf, bars) = plt.subplots(1, 2, figsize=(13, 4.8))
    tools = [t for t in TOOLS if runs.get(t)]
    for arm, style, suffix in ((runs, "-", ""), (constrained or {}, "--", ", constrained")):
        for tool in [t for t in TOOLS if arm.get(t)]:
            ordered = sorted(v for r in arm[tool] for v in r.latencies)
            if ordered:
                n = len(ordered)
                cdf.plot(ordered, [(i + 1) / n for i in range(n)], color=COLORS[tool], linestyle=style,
                         label=f"{tool}{suffix} ({len(arm[tool])} runs pooled)")
    cdf.set_xscale("log")
    cdf.set_xlabel("end-to-end latency (ms, log scale)")
    cdf.set_ylabel("fraction of records")
    cdf.set_title("steady load: latency CDF")
    cdf.grid(True, which="both", alpha=0.3)
    cdf.legend()
    rates = [_values(runs[t], lambda r: r.catch_up.records_per_s if r.catch_up else None) or [0.0] for t in tools]
    medians = [statistics.median(v) for v in rates]
    pairs = list(zip(medians, rates, strict=True))
    spread = [[m - min(v) for m, v in pairs], [max(v) - m for m, v in pairs]]
    drawn = bars.bar(tools, medians, yerr=spread, capsize=6, color=[COLORS[t] for t in tools])
    bars.bar_label(drawn, labels=[f"{m:,.0f}" for m in medians], label_type="center")
    bars.set_ylabel("records/s (median, min-max)")
    bars.set_title("catch-up throughput")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
