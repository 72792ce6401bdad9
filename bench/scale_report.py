"""The scale bench's results: one table per size with dr-stream and MirrorMaker 2 side by side,
and one plot.

A cell is the median of the repeats with their min-max in brackets (two runs on this 2-core
machine differ by up to 2x); the ratio is dr-stream's median over MirrorMaker 2's, lower is
better on every row. A group that never showed its new position within the watch counts as the
watch's length in the percentiles, and the row says how many did not.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.result_files import figure

DR, MM2 = "dr-stream", "MirrorMaker 2"
TOOLS = (DR, MM2)
COLORS = {DR: "tab:blue", MM2: "tab:orange"}


@dataclass
class Run:
    """One replicator through the scale workload once."""

    tool: str
    partitions: int
    groups: int
    repeat: int
    start_to_first_copy_s: float | None = None
    start_to_all_copied_s: float | None = None
    first_groups_s: float | None = None  # start -> every group shown on the destination
    live_s: list[float] = field(default_factory=list)  # commit -> new position shown, per group
    not_live: int = 0
    exact: int = 0  # groups at exactly the source's offsets at the end of the watch
    watch_s: float = 0.0
    rounds: dict[str, list[float]] = field(default_factory=dict)  # control loop -> round seconds seen
    cores_busy: float | None = None  # CPU-seconds per second while the groups move
    cpu_seconds: float = 0.0  # start -> kill -9
    peak_rss_mib: float = 0.0
    restart_to_first_copy_s: float | None = None
    restart_to_all_copied_s: float | None = None
    extra_copies: int | None = None  # records on the destination beyond the source's after the restart

    def live(self, q: float) -> float | None:
        waits = self.live_s + [self.watch_s] * self.not_live
        return percentile(waits, q) if waits else None

    def round_s(self, loop: str, worst: bool = False) -> float | None:
        seen = self.rounds.get(loop)
        return (max(seen) if worst else statistics.median(seen)) if seen else None


Metric = Callable[[Run], float | None]
ROWS: list[tuple[str, str, Metric]] = [
    ("start -> first copy (s)", ".1f", lambda r: r.start_to_first_copy_s),
    ("start -> all copied (s)", ".1f", lambda r: r.start_to_all_copied_s),
    ("start -> every group on the destination (s)", ".1f", lambda r: r.first_groups_s),
    ("group position live after a commit, p50 (s)", ".2f", lambda r: r.live(50)),
    ("... p99 (s)", ".2f", lambda r: r.live(99)),
    ("... slowest (s)", ".2f", lambda r: r.live(100)),
    ("groups not live within the watch", ".0f", lambda r: float(r.not_live)),
    ("poller round, median (s)", ".2f", lambda r: r.round_s("poller")),
    ("poller round, slowest (s)", ".2f", lambda r: r.round_s("poller", worst=True)),
    ("translate round, median (s)", ".2f", lambda r: r.round_s("translate")),
    ("translate round, slowest (s)", ".2f", lambda r: r.round_s("translate", worst=True)),
    ("cores busy while groups commit", ".2f", lambda r: r.cores_busy),
    ("CPU-seconds, start -> kill -9", ".0f", lambda r: r.cpu_seconds),
    ("peak RSS (MiB)", ".0f", lambda r: r.peak_rss_mib),
    ("kill -9 -> first copy after restart (s)", ".1f", lambda r: r.restart_to_first_copy_s),
    ("kill -9 -> all copied after restart (s)", ".1f", lambda r: r.restart_to_all_copied_s),
    ("records copied twice after kill -9", ".0f", lambda r: None if r.extra_copies is None else float(r.extra_copies)),
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def _values(runs: list[Run], metric: Metric) -> list[float]:
    return [v for v in (metric(r) for r in runs) if v is not None and not math.isnan(v)]


def cell(runs: list[Run], metric: Metric, fmt: str) -> str:
    values = _values(runs, metric)
    if not values:
        return "-"
    middle = format(statistics.median(values), fmt)
    return middle if len(values) == 1 else f"{middle} [{min(values):{fmt}}-{max(values):{fmt}}]"


def ratio(dr: list[Run], mm2: list[Run], metric: Metric) -> str:
    ours, theirs = _values(dr, metric), _values(mm2, metric)
    if not ours or not theirs or statistics.median(theirs) == 0:
        return "-"
    return f"{statistics.median(ours) / statistics.median(theirs):.2f}"


def sizes(runs: list[Run]) -> list[tuple[int, int]]:
    return sorted({(r.partitions, r.groups) for r in runs}, reverse=True)


def table(runs: list[Run], partitions: int, groups: int) -> str:
    at = [r for r in runs if (r.partitions, r.groups) == (partitions, groups)]
    dr, mm2 = [r for r in at if r.tool == DR], [r for r in at if r.tool == MM2]
    lines = [f"### {partitions:,} partitions, {groups:,} groups ({len(dr)} + {len(mm2)} runs)", "",
             f"| | {DR} | {MM2} | ratio (lower is better) |", "|---|---|---|---|"]
    for name, fmt, metric in ROWS:
        lines.append(f"| {name} | {cell(dr, metric, fmt)} | {cell(mm2, metric, fmt)} | {ratio(dr, mm2, metric)} |")
    return "\n".join(lines)


def markdown(runs: list[Run], when: str, machine: str, settings: str, png: str) -> str:
    parts = [f"# Scale bench {when}", "", f"Machine: {machine}.", "", settings, "", f"![scale]({png})", ""]
    parts += [table(runs, p, g) + "\n" for p, g in sizes(runs)]
    return "\n".join(parts)


def plot(runs: list[Run], png: Path) -> None:
    with figure(png, (11, 4), columns=2) as (left, right):
        biggest = sizes(runs)[0] if runs else (0, 0)
        at = [r for r in runs if (r.partitions, r.groups) == biggest]
        shown = [(n, m) for n, _, m in ROWS if n.startswith(("start -> first", "kill -9 -> first"))]
        shown += [("group live p50", lambda r: r.live(50)), ("group live p99", lambda r: r.live(99))]
        for i, tool in enumerate(TOOLS):
            mine = [r for r in at if r.tool == tool]
            heights = [statistics.median(_values(mine, m)) if _values(mine, m) else 0 for _, m in shown]
            left.bar([x + 0.4 * i for x in range(len(shown))], heights, 0.4, label=tool, color=COLORS[tool])
        left.set_xticks([x + 0.2 for x in range(len(shown))], [n.replace(" (s)", "") for n, _ in shown],
                        rotation=15, fontsize=8)
        left.set_ylabel("seconds (median of repeats)")
        left.set_title(f"{biggest[0]:,} partitions, {biggest[1]:,} groups")
        for tool in TOOLS:
            points = sorted((p, statistics.median(_values([r for r in runs if r.tool == tool and r.partitions == p],
                                                          lambda r: r.peak_rss_mib)))
                            for p in {r.partitions for r in runs if r.tool == tool})
            if points:
                right.plot(*zip(*points, strict=True), marker="o", label=tool, color=COLORS[tool])
        right.set_xscale("log")
        right.set_xlabel("source partitions")
        right.set_ylabel("peak RSS of the process tree (MiB)")
        right.set_title("memory against partitions")
