"""What a bench's runs share: two clusters of its own with work and log folders, and where its
results go: `<UTC time>.md`, `.json` and `.png` under its results folder, each also copied to
`latest.*` (whose report links `latest.png`), with the plot's common frame."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dr_stream.dev.clusters import LocalCluster
from dr_stream.runtime.paths import cache_dir


def stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


@contextmanager
def bench_clusters(name: str, when: str, ports: tuple[int, int]
                   ) -> Iterator[tuple[LocalCluster, LocalCluster, Path, Path]]:
    """(source, destination, work folder, log folder): the clusters stopped and the work folder
    removed on leaving; the logs stay."""
    work, logs = cache_dir() / "bench" / f"{name}-{when}", cache_dir() / "bench" / "logs" / f"{name}-{when}"
    logs.mkdir(parents=True, exist_ok=True)
    source = LocalCluster("bench-src", ports[0], work / "src")
    target = LocalCluster("bench-dst", ports[1], work / "dst")
    try:
        source.start()
        target.start()
        yield source, target, work, logs
    finally:
        target.stop()
        source.stop()
        shutil.rmtree(work, ignore_errors=True)


def write_results(out: Path, when: str, report: Callable[[str], str], data: object,
                  plot: Callable[[Path], None]) -> Path:
    """Writes the plot, the report (given the plot's file name) and the data; returns the report."""
    out.mkdir(parents=True, exist_ok=True)
    png = out / f"{when}.png"
    plot(png)
    markdown = out / f"{when}.md"
    markdown.write_text(report(png.name))
    (out / f"{when}.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    shutil.copyfile(png, out / "latest.png")
    shutil.copyfile(out / f"{when}.json", out / "latest.json")
    (out / "latest.md").write_text(markdown.read_text().replace(png.name, "latest.png"))
    return markdown


def write_aging(name: str, data: object, markdown: str) -> Path:
    """An aging bench's result, `bench/results/aging/<name>-<UTC time>.md` and `.json`; returns the report."""
    out = Path(__file__).resolve().parent / "results" / "aging"
    out.mkdir(parents=True, exist_ok=True)
    when = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (out / f"{name}-{when}.json").write_text(json.dumps(data, indent=1) + "\n")
    report = out / f"{name}-{when}.md"
    report.write_text(markdown)
    return report


@contextmanager
def figure(png: Path, size: tuple[float, float] = (7, 4), grid: bool = True, columns: int = 1) -> Iterator[Any]:
    """An Agg figure's axes (a tuple of them with `columns` > 1); on leaving, each one's legend,
    a tight layout, and the file written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, columns, figsize=size)
    try:
        yield axes
        for ax in (axes if columns > 1 else [axes]):
            if grid:
                ax.grid(True, alpha=0.3)
            ax.legend()
        fig.tight_layout()
        fig.savefig(png, dpi=100)
    finally:
        plt.close(fig)
