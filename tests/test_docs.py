"""The README and `docs/` agree with the code: imports they show run, links resolve, generated
references equal what the code writes, the README's flow file parses, and the README stays a
front door."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from dr_stream import __version__
from dr_stream.cli import parser
from dr_stream.core.config import parse_flow
from dr_stream.exit_codes import ExitCode, markdown_table
from dr_stream.kafka.reachability import Refusal
from dr_stream.replication.losses import CAUSES
from dr_stream.runtime.paths import project_root
from tools.references import REFERENCES

ROOT = project_root()
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md")), ROOT / "bench" / "HISTORY.md", ROOT / "CHANGELOG.md"]
TROUBLESHOOTING = ROOT / "docs" / "troubleshooting.md"


def _text(page: Path) -> str:
    return page.read_text()


def _headings(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings (fenced code left out)."""
    anchors, fenced = set(), False
    for line in _text(page).splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#+ (.*)", line)):
            anchors.add(_anchor(m.group(1)))
    return anchors


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading's text."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_is_a_front_door_of_at_most_250_lines_that_maps_every_guide():
    text = _text(README)
    assert len(text.splitlines()) <= 250
    guides = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert sorted(g for g in guides if f"]({g})" not in text) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_dr_stream_import_a_page_shows_names_a_module_and_a_name_that_exist(page):
    text = _text(page)
    for module, names in re.findall(r"^from (dr_stream[\w.]*) import ([\w, ]+)$", text, re.MULTILINE):
        for name in names.split(","):
            assert hasattr(importlib.import_module(module), name.strip()), f"{page.name}: {module}.{name}"
    for module in re.findall(r"^import (dr_stream[\w.]*)$", text, re.MULTILINE):
        importlib.import_module(module)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_of_a_page_reaches_a_file_and_a_heading_that_exist(page):
    dead = []
    for target in re.findall(r"\]\(([^)\s]+)\)", _text(page)):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in _headings(linked)):
            dead.append(target)
    assert dead == []


def test_the_generated_references_are_the_ones_the_code_writes():
    stale = [out.relative_to(ROOT).as_posix() for out, render in REFERENCES.items() if out.read_text() != render()]
    assert stale == [], "run `python -m tools.references`"


def test_the_readme_lists_every_exit_code_as_the_code_defines_it():
    assert markdown_table() in _text(README)


def test_the_readmes_complete_flow_file_parses_as_shown(monkeypatch):
    block = re.search(r"^```yaml\n(.*?)^```", _text(README), re.MULTILINE | re.DOTALL)
    assert block, "the README shows a complete flow file"
    for name in ("DC1_PASSWORD", "DC2_PASSWORD", "TRUSTSTORE_PASSWORD"):
        monkeypatch.setenv(name, "secret")
    flow = parse_flow(yaml.safe_load(block.group(1)), "README.md")
    assert flow.name == "dc1-to-dc2" and flow.source.kafka["security.protocol"] == "SASL_SSL"
    assert flow.streaming.offset_index.startswith("hdfs://") and flow.metrics.port == 9404


def test_every_make_target_a_page_times_takes_the_time_the_makefile_says():
    makefile = _text(ROOT / "Makefile")
    said = {}
    for comment, target in re.findall(r"((?:^#.*\n)+)^([\w-]+):", makefile, re.MULTILINE):
        if m := re.search(r"about (\d+) min", comment):
            said[target] = m.group(1)
    assert {"bench", "profile", "bench-scale"} <= said.keys()
    wrong = []
    for page in PAGES:
        for target, minutes in re.findall(r"`?make ([\w-]+)`?\s+(?:#\s*)?\(?about (\d+) min", _text(page)):
            if target in said and said[target] != minutes:
                wrong.append(f"{page.name}: make {target} about {minutes} min, the Makefile says {said[target]}")
    assert wrong == []


def test_a_verdict_a_wrong_command_line_and_a_wrong_flow_file_exit_differently(tmp_path):
    def exit_of(*args: str) -> int:
        return subprocess.run([sys.executable, "-m", "dr_stream.cli", *args], capture_output=True).returncode

    missing = str(tmp_path / "missing.yaml")
    assert exit_of("status", "--no-such-option") == ExitCode.USAGE
    assert exit_of("check-config", "--config", missing) == ExitCode.CONFIG
    assert len({int(code) for code in ExitCode}) == len(ExitCode)
    assert ExitCode.ATTENTION not in (ExitCode.USAGE, ExitCode.CONFIG)


def _latest_row(metric: str) -> list[str]:
    """The medians of one row of `bench/results/latest.md`: micro-batch, real-time, plain Spark,
    MirrorMaker 2, then the ratios."""
    for line in (ROOT / "bench" / "results" / "latest.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == metric:
            return [c.split(" (")[0] for c in cells[1:]]
    raise AssertionError(f"bench/results/latest.md has no row {metric!r}")


def test_the_readmes_headline_against_mirrormaker_2_is_the_latest_bench_results():
    text = " ".join(_text(README).split())
    rate = _latest_row("catch-up: records/s while copying")
    per_cpu = _latest_row("catch-up: records copied per CPU-second")
    p99 = _latest_row("steady: end-to-end latency p99 (ms)")
    rss = _latest_row("cost: peak RSS (MiB)")
    # MirrorMaker 2's re-reads over the groups 1k to 100k behind, fewest to most
    reread = sorted((_latest_row(f"failover, group {lag} behind: records re-read")[3]
                     for lag in ("1,000", "10,000", "100,000")), key=lambda n: int(n.replace(",", "")))
    shown = [f"{rate[4]}x its rate", f"{per_cpu[4]}x its records per CPU-second",
             f"steady p99 is {p99[1]} ms against its {p99[3]} ms", f"{rss[4]}x its memory",
             f"re-reads {reread[0]} to {reread[-1]}"]
    assert [s for s in shown if s not in text] == []


def test_the_notebook_is_committed_with_the_outputs_of_a_run_and_its_lag_plot():
    import json

    cells = json.loads((ROOT / "notebooks" / "offset_index.ipynb").read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code" and "spark.stop()" not in "".join(c["source"])]
    assert code and all(c.get("outputs") for c in code), "run `python -m tools.notebook_outputs`"
    assert any("image/png" in o.get("data", {}) for c in code for o in c["outputs"])
    shown = "".join("".join(o.get("text", "")) for c in code for o in c["outputs"])
    assert "worked by hand: matches" in shown


def test_troubleshooting_has_an_entry_for_every_alert_loss_cause_refusal_and_exit_code():
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "dr-stream-alerts.yaml").read_text())
    wanted = {_anchor(rule["alert"]) for group in rules["groups"] for rule in group["rules"]}
    wanted |= {_anchor(f"Loss: `{cause}`") for cause in CAUSES}
    wanted |= {_anchor(f"Refused: {refusal.words}") for refusal in Refusal}
    wanted |= {_anchor(f"Exit {code.value}: `{code.name}`") for code in ExitCode}
    assert len(wanted) > 30
    assert sorted(wanted - _headings(TROUBLESHOOTING)) == []


def _command_lines(text: str) -> tuple[list[str], list[str]]:
    """The `dr-stream` commands a page shows: whole lines of its code blocks (run as written,
    but for a trailing comment and a pipe), and the ones it names inline."""
    blocks, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced and (m := re.match(r"^\s*(?:\$ )?(dr-stream\s.*)$", line)):
            blocks.append(m.group(1))
    inline = re.findall(r"`(dr-stream [^`]+)`", text)
    return [_as_run(c) for c in blocks], [_as_run(c) for c in inline]


def _as_run(command: str) -> str:
    return re.split(r"\s(?:\||&&|;|>|2>)\s?", command.split(" #")[0].strip())[0]


def _options(command: argparse.ArgumentParser) -> set[str]:
    return {o for action in command._actions for o in action.option_strings}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_dr_stream_command_a_page_shows_is_one_the_cli_takes(page):
    """A code block's command parses as written (an optional part in brackets need only name
    options the command has); one named inline names a command and options it has."""
    top = parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices
    blocks, inline = _command_lines(_text(page))
    wrong = []
    for line in blocks:
        optional = re.findall(r"\[([^\]]*)\]", line)
        words = shlex.split(re.sub(r"\[[^\]]*\]", "", line))[1:]
        known = _options(commands[words[0]]) if words and words[0] in commands else set()
        wrong += [f"{line}: {o}" for part in optional for o in re.findall(r"--[\w-]+", part) if o not in known]
        with contextlib.redirect_stderr(io.StringIO()) as said, contextlib.redirect_stdout(io.StringIO()):
            try:
                parser().parse_args(words)
            except SystemExit as done:
                if done.code not in (0, None):
                    wrong.append(f"{line}: {said.getvalue().strip().splitlines()[-1]}")
    for line in inline:
        name, *rest = line.split()[1:]
        if name.startswith("--"):
            wrong += [] if name in _options(top) else [f"{line}: no option {name}"]
        elif name == "COMMAND":  # the placeholder for any of them
            continue
        elif name not in commands:
            wrong.append(f"{line}: no command {name}")
        else:
            wrong += [f"{line}: no option {w}" for w in rest
                      if w.startswith("--") and w.split("=")[0] not in _options(commands[name])]
    assert wrong == []


def test_the_version_dr_stream_says_is_the_packages_and_the_changelog_has_its_entry():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert __version__ == project["version"]
    assert f"## {__version__}" in _text(ROOT / "CHANGELOG.md")
    said = subprocess.run([sys.executable, "-m", "dr_stream.cli", "--version"], capture_output=True, text=True)
    assert (said.returncode, said.stdout.strip()) == (0, f"dr-stream {__version__}")


def test_the_compatibility_page_names_the_versions_the_project_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    jvm = project["tool"]["dr-stream"]["jvm"]
    pins = dict(pin.split("==") for pin in project["project"]["dependencies"])
    from dr_stream.dev.kube_build import KUBERNETES_VERSION

    wanted = {"spark": jvm["spark"], "delta": jvm["delta"], "kafka clients": jvm["kafka"],
              "brokers": jvm["kafka-broker"], "compat brokers": jvm["kafka-broker-compat"], "hadoop": jvm["hadoop"],
              "pyspark": pins["pyspark"], "deltalake": pins["deltalake"], "confluent-kafka": pins["confluent-kafka"],
              "kubernetes": KUBERNETES_VERSION, "dr-stream": __version__}
    page = _text(ROOT / "docs" / "compatibility.md")
    assert {name: version for name, version in wanted.items() if version not in page} == {}
