"""kill -9 during a large copy, then restart from the checkpoint: every record exactly once.

The flow runs as a real `./spark-submit.sh` process group, so this also covers shipping
the package and jars through spark-submit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from dr_stream.runtime.paths import project_root
from tests.flows import one_topic_flow_file
from tests.kafka_tools import (
    consume_all,
    count,
    create_topic,
    produce,
    provenance,
    topic_exists,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration
TOTAL = 200_000


def _start(config: Path, log: Path, *spark_args: str) -> subprocess.Popen:
    out = open(log, "ab")  # kept open for the child's lifetime
    return subprocess.Popen(
        [str(project_root() / "spark-submit.sh"), str(config), *spark_args],
        stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=project_root(),
    )


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _kill9(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


# Real-time mode reads without a batch bound and checkpoints every `trigger`: a kill lands inside
# a long-running batch, and the restart re-reads from its start. It needs a slot per partition.
# Micro-batch mode, the default, is killed twice, so a restart is itself restarted from its own
# checkpoint; one kill shows real-time mode's rule (each spark-submit start costs about 25 s).
MODES = {
    "microbatch": ({"trigger": "200ms", "max_records_per_batch": 15000}, (), (30_000, 90_000)),
    "realtime": ({"mode": "realtime", "trigger": "5s"}, ("--master", "local[4]"), (60_000,)),
}


@pytest.mark.parametrize("mode", MODES)
def test_kill_9_during_a_large_copy_then_restart_copies_every_record_exactly_once(dc1, dc2, topics, tmp_path, mode):
    streaming, spark_args, kill_at = MODES[mode]
    topic = unique("crash.")
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, 3)
    produce(dc1.bootstrap, topic, ({"value": f"{i:08d}".encode() * 8, "partition": i % 3} for i in range(TOTAL)))
    config = one_topic_flow_file(tmp_path, "crash-test", dc1.bootstrap, dc2.bootstrap, topic, **streaming)
    log = tmp_path / "flow.log"

    def copied() -> int:
        return count(dc2.bootstrap, topic) if topic_exists(dc2.bootstrap, topic) else 0

    kills = 0
    for threshold in kill_at:
        proc = _start(config, log, *spark_args)
        try:
            assert wait_until(lambda t=threshold: copied() >= t, 240), log.read_text()[-3000:]
        finally:
            _kill9(proc)
        kills += 1
    partial = copied()
    assert partial < TOTAL, "the copy finished before the crash; the test proves nothing"

    proc = _start(config, log, *spark_args)
    try:
        assert wait_until(lambda: copied() >= TOTAL, 300), log.read_text()[-3000:]
        time.sleep(3)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            _kill9(proc)
    # SIGTERM to spark-submit.sh alone (as a scheduler sends it) stops Spark too: nothing of its group is left.
    assert wait_until(lambda: not _group_alive(proc.pid), 30), "spark-submit.sh left a process running"

    records = consume_all(dc2.bootstrap, topic)
    origins = Counter((r.partition, provenance(r)[-1]["offset"]) for r in records)
    assert len(records) == TOTAL, f"{len(records) - TOTAL:+d} records after {kills} kills"
    assert set(origins.values()) == {1}
    assert all(r.partition == p for r in records for p in [provenance(r)[-1]["partition"]])


def test_sigterm_to_the_whole_process_group_during_a_batch_lets_it_finish_and_prints_no_stack_trace(
        dc1, dc2, topics, tmp_path):
    # `dr-stream run` started the Spark JVM as its child: a SIGTERM to the process group (systemd's
    # default, a terminal's kill of the job) reaches the JVM too, whose shutdown would stop Spark
    # under the running batch.
    topic = unique("sigterm.")
    topics.append(topic)
    total = 45_000
    create_topic(dc1.bootstrap, topic, 3)
    produce(dc1.bootstrap, topic, ({"value": f"{i:08d}".encode() * 32, "partition": i % 3} for i in range(total)))
    config = one_topic_flow_file(tmp_path, "sigterm-test", dc1.bootstrap, dc2.bootstrap, topic,
                                 trigger="200ms", max_records_per_batch=15_000)
    log = tmp_path / "flow.log"

    def run() -> subprocess.Popen:
        out = open(log, "ab")  # kept open for the child's lifetime
        return subprocess.Popen([sys.executable, "-m", "dr_stream.cli", "run", "--config", str(config)],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=project_root())

    proc = run()
    try:
        # Batches follow each other while the backlog lasts: the signal lands inside one.
        assert wait_until(lambda: "] batch 0:" in log.read_text(), 180, interval=0.05), log.read_text()[-3000:]
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=90) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            _kill9(proc)
    assert "finishes its running batch first" in log.read_text(), log.read_text()[-3000:]
    assert wait_until(lambda: not _group_alive(proc.pid), 30), "the flow left a process running"
    stopped_with = count(dc2.bootstrap, topic)
    assert 0 < stopped_with < total, f"{stopped_with} records copied: the stop did not land mid-copy"

    proc = run()
    try:
        assert wait_until(lambda: count(dc2.bootstrap, topic) >= total, 240), log.read_text()[-3000:]
        time.sleep(2)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            _kill9(proc)
    origins = Counter((r.partition, provenance(r)[-1]["offset"]) for r in consume_all(dc2.bootstrap, topic))
    assert sum(origins.values()) == total and set(origins.values()) == {1}
    # Neither stop, mid-batch or idle, printed a stack trace.
    traces = [line for line in log.read_text().splitlines()
              if "Exception" in line or "Traceback" in line or line.startswith("\tat ")]
    assert traces == [], "\n".join(traces[:20])
