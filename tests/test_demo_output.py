"""`make demo` tells its own story: no librdkafka lines, no Spark start-up warnings (real brokers,
real Spark: the demo itself, on clusters of its own that it starts and stops, so a developer's
`dr-stream dev up` on the dev ports is left alone)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from dr_stream.runtime.paths import project_root
from tests.clusters import worker_port

# Ports no other test cluster uses (tests/conftest.py), below Linux's ephemeral range.
DEMO_PORTS = (32092, 32192)


@pytest.mark.integration
def test_the_demo_prints_its_story_and_no_client_or_spark_start_up_noise(tmp_path):
    ports = ",".join(str(worker_port(p)) for p in DEMO_PORTS)
    done = subprocess.run([sys.executable, "-m", "dr_stream.dev.demo", "--ports", ports, "--home", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, cwd=project_root())
    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 0, "\n".join(lines[-40:])
    assert [line for line in lines if re.match(r"%\d\|", line)] == []
    # A warning is for something the demo did not mean to happen (its own commits misread, once).
    # The JVM's own notice of the incubator module Spark's launcher always adds cannot be turned off.
    assert [line for line in lines if re.search(r"\bWARN(ING)?\b", line)
            and not line.startswith("WARNING: Using incubator modules")] == []
    assert "counts stable for 10s: every record exactly once in each cluster, nothing loops" in lines
    assert len(lines) < 100, f"{len(lines)} lines"
