"""The aging bench's report: a row per figure in the issue's names, a column per age, and the
state of each table and topic on its own row."""

from __future__ import annotations

from bench.aging import Age, Aging, markdown, rows
from bench.soak import Load


def _age(day: float, failover_all: float | None) -> Age:
    return Age(day, 1.5, failover_all, 1000, 2.0, 0, 4.0, 1, 30.0, 1024.0,
               {"offset-index": (2 * 2**20, 10), "__dr_stream_runs.bench (bench-dst)": (2**20, 3)})


def test_the_report_has_a_row_per_figure_and_a_column_per_age():
    result = Aging(Load(100, 1000, 500), 60.0, [_age(1.0, 3.0), _age(7.2, None), _age(30.1, 3.3)])
    names = [name for name, _ in rows(result)]
    assert names == ["failover, source gone, 1 group", "failover, source gone, 1,000 groups",
                     "start-up to the first copy", "status", "drill", "driver peak RSS",
                     "driver JVM heap after a full collection", "state on disk, all",
                     "state on disk, __dr_stream_runs.bench (bench-dst)", "state on disk, offset-index"]
    report = markdown(result, "x.png")
    assert "| metric | day 1.0 | day 7.2 | day 30.1 |" in report
    assert "| failover, source gone, 1,000 groups | 3.00 s | - | 3.30 s |" in report
    assert "| drill | 4.00 s (exit 1) | 4.00 s (exit 1) | 4.00 s (exit 1) |" in report
    assert "| state on disk, all | 3.00 MiB (13 files) |" in report
