"""The bench harness at a tiny size, so `make bench` cannot rot: the replicators of its rounds
(dr-stream in micro-batch mode, the plain Spark copy, MirrorMaker 2; not real-time mode, which
differs only in the flow's mode) run through every workload on their own clusters and the
report holds a number for each, and none for a replicator that did not run; its constrained arm
runs MirrorMaker 2 again, on one core."""

from __future__ import annotations

import pytest

from tests.clusters import worker_port

pytestmark = pytest.mark.integration


def table(text: str, first_column: str = "metric") -> dict[str, tuple[str, ...]]:
    """metric -> (dr-stream micro-batch, dr-stream realtime, MirrorMaker 2, plain Spark), from the
    table whose first column is `first_column`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_column} |"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in lines[start:end] if "---" not in line]
    header = rows[0]
    columns = [header.index(name) for name in ("dr-stream (micro-batch)", "dr-stream realtime", "MirrorMaker 2",
                                               "plain Spark")]
    return {cells[0]: tuple(cells[i] for i in columns) for cells in rows[1:]}


def test_bench_runs_its_replicators_through_every_workload_and_reports_each_metric_and_none_for_the_others(tmp_path):
    from bench.run import run
    from bench.workloads import SMOKE

    report = run(SMOKE, tmp_path, ports=(worker_port(26092), worker_port(27092)), repeat=1)

    rows = table(report.read_text())
    sent = f"{SMOKE.steady_rate * SMOKE.steady_seconds:,}"
    assert rows["steady: records received"] == (sent, "-", sent, sent)
    assert all(cells[1] == "-" for cells in rows.values()), "real-time mode did not run"
    dr_stream_only = {m for m in rows if m.startswith(("failover with the source gone", "offset index"))}
    assert dr_stream_only, rows
    assert all("-" not in (cells[0], cells[2]) for m, cells in rows.items() if m not in dr_stream_only), rows
    # The plain Spark copy translates nothing: a number in every row but the failover ones.
    assert all(cells[3] != "-" for m, cells in rows.items() if not m.startswith("failover") and m not in dr_stream_only)
    assert all(cells[3] == "-" for m, cells in rows.items() if m.startswith("failover")), rows
    assert all(rows[m][0] != "-" for m in dr_stream_only), rows
    for lag in ("at the head", *(f"{lag:,} behind" for lag in SMOKE.lags[1:])):
        assert rows[f"failover, group {lag}: records re-read"][0] == "0"
        assert rows[f"failover, group {lag}: records skipped"][0] == "0"
        assert rows[f"failover, group {lag}: first synced offset was the final one"][0] == "yes 1/1"
    assert all(float(rss.replace(",", "")) > 0 for i, rss in enumerate(rows["cost: peak RSS (MiB)"]) if i != 1)
    long = table(report.read_text(), "long catch-up")
    # The long catch-up: the replicators it runs copied the grown topic, each with a rate and a cost.
    ran = [i for i, tool in enumerate(("dr-stream", "dr-stream realtime", "MirrorMaker 2", "plain Spark"))
           if tool in SMOKE.long_tools]
    for metric in ("records/s while copying", "CPU-seconds, first record copied -> all copied"):
        assert [long[metric][i] != "-" for i in range(4)] == [i in ran for i in range(4)], long
    assert f"Long catch-up: {SMOKE.long_records:,} records" in report.read_text()
    # The constrained arm: the replicators it runs have the same rows, on one core; the others none.
    constrained = table(report.read_text(), "constrained")
    arm = [i for i, tool in enumerate(("dr-stream", "dr-stream realtime", "MirrorMaker 2", "plain Spark"))
           if tool in SMOKE.constrained_tools]
    assert constrained.keys() == {m for m in rows if not m.startswith("failover with the source gone")}
    assert constrained["steady: records received"] == tuple(sent if i in arm else "-" for i in range(4))
    assert [constrained["catch-up: records copied per CPU-second"][i] != "-" for i in range(4)] == \
        [i in arm for i in range(4)], constrained
    assert "## Constrained: each replicator on 1 of the" in report.read_text()
    assert (tmp_path / "latest.png").stat().st_size > 10_000
    assert "latest.png" in (tmp_path / "latest.md").read_text()
