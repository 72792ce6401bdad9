"""The A/B script's pure parts: how an arm is read and how its runs are summed up."""

import pytest

from bench.ab import Arm, summary
from bench.report import MM2, ToolResult
from bench.workloads import CatchUp


def test_an_arm_keeps_equals_signs_inside_a_value_and_reads_several_settings():
    arm = Arm.parse("c2=DR_STREAM_DRIVER_JAVA_OPTIONS=-XX:GCTimeRatio=12 -Xss1m;DR_STREAM_MASTER=local[2]")
    assert arm == Arm("c2", {"DR_STREAM_DRIVER_JAVA_OPTIONS": "-XX:GCTimeRatio=12 -Xss1m",
                             "DR_STREAM_MASTER": "local[2]"})


def test_an_empty_arm_runs_as_is_and_a_nameless_or_malformed_one_is_refused():
    assert Arm.parse("now=") == Arm("now", {})
    with pytest.raises(ValueError, match="name"):
        Arm.parse("=A=B")
    with pytest.raises(ValueError, match="KEY=VALUE"):
        Arm.parse("x=JUSTAKEY")


def _run(name: str, rate: int, cpu: float) -> ToolResult:
    return ToolResult(name, catch_up=CatchUp(20.0, 1.0, rate, 1024.0), cpu_seconds=cpu, peak_rss=2**30,
                      latencies=[10.0] * 100)


def test_the_summary_gives_each_arms_median_its_spread_and_its_ratio_to_mirror_maker():
    table = summary({"now": [_run("now", 30_000, 90), _run("now", 40_000, 80), _run("now", 50_000, 100)],
                     MM2: [_run(MM2, 60_000, 40), _run(MM2, 64_000, 45), _run(MM2, 62_000, 50)]})
    now = next(line for line in table.splitlines() if line.startswith("| now |"))
    assert "40,000 (30,000-50,000) 0.65x" in now
    assert "90.0 (80.0-100.0) 2.00x" in now
    mm2 = next(line for line in table.splitlines() if line.startswith(f"| {MM2} |"))
    assert "x" not in mm2.replace(MM2, "")
