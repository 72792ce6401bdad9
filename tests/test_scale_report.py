"""The scale bench's rules and report, without clusters: what counts as a group's new position,
and how repeats and groups that never moved become the table's cells."""

from __future__ import annotations

from bench.scale_report import DR, MM2, Run, cell, markdown, plot, ratio, table
from bench.scale_workload import Scale, exact, moved, shown


def test_a_scale_puts_each_group_on_one_topic_of_ten_partitions_as_the_replicator_names_it():
    scale = Scale(30, 4)
    assert scale.topics == ["sc.t000", "sc.t001", "sc.t002"]
    at = scale.at(10, lambda t: f"src.{t}")
    assert at["bench-g00003"] == {("src.sc.t000", p): 10 for p in range(10)}
    assert Scale(5, 1).at(1) == {"bench-g00000": {("sc.t000", p): 1 for p in range(5)}}


def test_a_group_is_live_once_every_partition_shows_a_position_other_than_before():
    wanted = {"a": {("t", 0): 10, ("t", 1): 10}, "b": {("t", 0): 10}}
    before = {"a": {("t", 0): 5, ("t", 1): 5}, "b": {("t", 0): 5}}
    assert moved(before, {"a": {("t", 0): 10, ("t", 1): 5}, "b": {("t", 0): 5}}, wanted) == set()
    assert moved(before, {"a": {("t", 0): 10, ("t", 1): 6}, "b": {}}, wanted) == {"a"}  # approximate counts
    assert moved({}, {"b": {("t", 0): 10}}, wanted) == {"b"}
    assert exact({"a": {("t", 0): 10, ("t", 1): 6}, "b": {("t", 0): 10}}, wanted) == 1
    assert shown({"a": {("t", 0): 1, ("t", 1): 1}, "b": {("t", 0): 1}}, wanted)
    assert not shown({"a": {("t", 0): 1}, "b": {("t", 0): 1}}, wanted)


def _run(tool: str, repeat: int, live: list[float], not_live: int = 0, rss: float = 900.0) -> Run:
    return Run(tool, 1000, 5000, repeat, start_to_first_copy_s=10.0 + repeat, live_s=live, not_live=not_live,
               watch_s=180.0, peak_rss_mib=rss, rounds={"poller": [0.5, 1.5, 1.0]})


def test_a_group_that_never_moved_counts_as_the_whole_watch_in_the_percentiles():
    run = _run(DR, 0, [1.0, 2.0, 3.0], not_live=1)
    assert run.live(50) == 3.0 and run.live(100) == 180.0
    assert run.round_s("poller") == 1.0 and run.round_s("poller", worst=True) == 1.5
    assert run.round_s("translate") is None


def test_a_cell_is_the_median_of_the_repeats_with_their_range_and_the_ratio_is_ours_over_theirs():
    ours = [_run(DR, 0, [1.0]), _run(DR, 1, [1.0])]
    theirs = [_run(MM2, 0, [2.0]), _run(MM2, 1, [2.0])]
    assert cell(ours, lambda r: r.start_to_first_copy_s, ".1f") == "10.5 [10.0-11.0]"
    assert ratio(ours, theirs, lambda r: r.live(50)) == "0.50"
    assert ratio(ours, [], lambda r: r.live(50)) == "-"
    rows = table(ours + theirs, 1000, 5000).splitlines()
    assert rows[0] == "### 1,000 partitions, 5,000 groups (2 + 2 runs)"
    assert "| start -> first copy (s) | 10.5 [10.0-11.0] | 10.5 [10.0-11.0] | 1.00 |" in rows
    assert "| translate round, median (s) | - | - | - |" in rows


def test_the_report_has_a_table_per_size_largest_first_and_a_plot(tmp_path):
    runs = [_run(DR, 0, [1.0]), _run(MM2, 0, [2.0], rss=1500.0),
            Run(DR, 10, 50, 0, peak_rss_mib=700.0), Run(MM2, 10, 50, 0, peak_rss_mib=600.0)]
    text = markdown(runs, "20261124T000000Z", "2 cores", "settings", "latest.png")
    assert text.index("### 1,000 partitions") < text.index("### 10 partitions") and "![scale](latest.png)" in text
    plot(runs, tmp_path / "scale.png")
    assert (tmp_path / "scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
