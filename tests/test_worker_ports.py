"""Each pytest-xdist worker's test ports stay apart from every other worker's (tests/clusters.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.clusters import CLUSTER_REACH, MAX_WORKERS, WORKER_PORT_STEP, worker_index, worker_port

TESTS = Path(__file__).resolve().parent
EPHEMERAL_START = 32768


def _ports_tests_start_clusters_on() -> set[int]:
    found: set[int] = set()
    for module in TESTS.rglob("*.py"):
        text = module.read_text()
        found |= {int(p) for p in re.findall(r"(?:started_cluster|started_secured)\([^)]*?\b(\d{5})\b", text)}
        found |= {int(p) for p in re.findall(r"worker_port\((\d{5})\)", text)}
        for pair in re.findall(r"^DEMO_PORTS = \((\d{5}), (\d{5})\)", text, re.M):
            found |= {int(p) for p in pair}
    return found


def test_every_port_a_test_starts_a_cluster_on_keeps_the_layout_the_worker_shift_needs():
    ports = _ports_tests_start_clusters_on()
    assert {21092, 22092, 20092, 24592, 17092, 32192} <= ports, sorted(ports)
    assert {p for p in ports if p % 100 != 92} == set()


def test_no_two_workers_clusters_share_a_port_and_none_reaches_the_ephemeral_range():
    bases = _ports_tests_start_clusters_on()
    taken: dict[int, int] = {}
    for worker in range(MAX_WORKERS):
        for base in bases:
            for port in range(base + WORKER_PORT_STEP * worker, base + WORKER_PORT_STEP * worker + CLUSTER_REACH + 1):
                assert taken.setdefault(port, worker) == worker, (port, worker, taken[port])
    assert max(taken) < EPHEMERAL_START


def test_a_worker_moves_its_ports_by_its_number_and_one_beyond_the_layout_is_refused(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert worker_port(21092) == 21092
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    assert worker_index() == 2 and worker_port(21092) == 21092 + 2 * WORKER_PORT_STEP
    monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{MAX_WORKERS}")
    with pytest.raises(RuntimeError, match="at most 4 workers"):
        worker_port(21092)
