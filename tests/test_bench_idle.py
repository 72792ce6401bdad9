"""`make bench-idle`'s pure parts: the flow without translation, and the report's figures."""

from __future__ import annotations

import yaml

from bench.idle_cost import DR, DR_QUIET, MM2, _flow_file, report


def test_the_quiet_flow_is_the_bench_flow_with_translation_off(tmp_path):
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    on, off = yaml.safe_load(_flow_file(tmp_path / "on", True).read_text()), yaml.safe_load(
        _flow_file(tmp_path / "off", False).read_text())
    assert on["offsets"].get("translate", True) is True
    assert off["offsets"]["translate"] is False
    assert {k: v for k, v in off.items() if k != "offsets"} == {k: v for k, v in on.items() if k != "offsets"}


def test_the_report_gives_medians_ratios_to_mirrormaker_and_what_translation_costs():
    text = report({DR: [3.0, 2.0, 4.0], DR_QUIET: [1.5, 1.0, 2.0], MM2: [2.0, 2.0, 1.0]}, 60, "now")
    assert "| dr-stream | 3.00 (2.00-4.00) | 1.50 |" in text
    assert "| MirrorMaker 2 | 2.00 (1.00-2.00) | 1.00 |" in text
    assert "Translation idle (the translate query's triggers, the poller, the translation thread): 1.50 CPU-s" in text
