"""The bench harness at a tiny size, so `make bench` cannot rot: both replicators run through
every workload on their own clusters and the report holds a number for each."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def table(text: str) -> dict[str, tuple[str, str]]:
    rows = [line.split("|")[1:-1] for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    return {cells[0].strip(): (cells[1].strip(), cells[2].strip()) for cells in rows[1:]}


def test_bench_runs_both_replicators_through_every_workload_and_reports_each_metric(tmp_path):
    from bench.run import run
    from bench.workloads import SMOKE

    report = run(SMOKE, tmp_path, ports=(26092, 27092))

    rows = table(report.read_text())
    sent = f"{SMOKE.steady_rate * SMOKE.steady_seconds:,}"
    assert rows["steady: records received"] == (sent, sent)
    dr_stream_only = {m for m in rows if m.startswith(("failover with the source gone", "offset index"))}
    assert dr_stream_only, rows
    assert all(dr != "-" and (mm != "-" or m in dr_stream_only) for m, (dr, mm) in rows.items()), rows
    for lag in ("at the head", *(f"{lag:,} behind" for lag in SMOKE.lags[1:])):
        assert rows[f"failover, group {lag}: records re-read"][0] == "0"
        assert rows[f"failover, group {lag}: records skipped"][0] == "0"
        assert rows[f"failover, group {lag}: first synced offset was the final one"][0] == "yes"
    assert float(rows["cost: peak RSS (MiB)"][0].replace(",", "")) > 0
    assert (tmp_path / "latest.png").stat().st_size > 10_000
    assert "latest.png" in (tmp_path / "latest.md").read_text()
