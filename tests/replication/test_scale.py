"""A flow at the scale the suite can afford: 30 topics x 10 partitions and 1,000 groups.

Every group's position reaches the destination exactly; a kill -9 while the flow copies a record
onto every partition is followed by a restart that resumes each of the 300 partitions exactly
once; and no control loop's round runs into its next (each period at least its round). No
figure here is a timing goal: `make bench-scale` measures those against MirrorMaker 2.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from dr_stream.runtime.paths import project_root
from tests.kafka_tools import (
    admin,
    commit_groups,
    consume_all,
    create_topic,
    delete_groups,
    group_positions,
    produce,
    provenance,
    unique,
    wait_until,
)
from tests.replication.test_metrics_endpoint import free_port, scrape, value

pytestmark = pytest.mark.integration
TOPICS, PARTITIONS, RECORDS, GROUPS = (int(x) for x in os.environ.get("SCALE", "30,10,10,1000").split(","))


def _ends(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    """Every partition's log end, in one request."""
    client = admin(bootstrap)
    futures = client.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t in topics
                                   for p in range(PARTITIONS)}, request_timeout=30)
    return {(tp.topic, tp.partition): f.result(timeout=30).offset for tp, f in futures.items()}


def _copied(bootstrap: str, topics: list[str]) -> int:
    try:
        return sum(_ends(bootstrap, topics).values())
    except Exception:  # a topic not created on the destination yet
        return 0


def _start(config: Path, log: Path, port: int) -> subprocess.Popen:
    out = open(log, "ab")  # kept open for the child's lifetime
    return subprocess.Popen([sys.executable, "-m", "dr_stream.cli", "run", "--config", str(config),
                             "--metrics-port", str(port)],
                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=project_root())


def _kill9(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def _stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        _kill9(process)


def test_300_partitions_and_1000_groups_translate_every_group_resume_each_partition_once_and_no_round_overlaps(
        dc1, dc2, topics, tmp_path):
    name = unique("scale-")
    names = [f"{name}.t{i:02d}" for i in range(TOPICS)]
    topics.extend(names)
    for topic in names:
        create_topic(dc1.bootstrap, topic, PARTITIONS)
        produce(dc1.bootstrap, topic, ({"value": f"{topic}/{i}".encode(), "partition": i % PARTITIONS}
                                       for i in range(PARTITIONS * RECORDS)))
    # group i reads one topic and stands at a different offset on each of its partitions
    groups = {f"{name}-g{i:04d}": {(names[i % TOPICS], p): 1 + (i + p) % RECORDS for p in range(PARTITIONS)}
              for i in range(GROUPS)}
    commit_groups(dc1.bootstrap, groups)
    config = tmp_path / "flow.yaml"
    config.write_text(yaml.safe_dump({
        "name": name,
        "source": {"alias": "dc1", "bootstrap_servers": dc1.bootstrap},
        "destination": {"alias": "dc2", "bootstrap_servers": dc2.bootstrap},
        "topics": {"include": [re.escape(name) + r"\..*"]},
        "offsets": {"groups": {"include": [re.escape(name) + "-g.*"]}},
        "streaming": {"checkpoint_dir": str(tmp_path / "cp"), "offset_index": str(tmp_path / "index"),
                      "trigger": "500ms"},
        "metrics": {"sample_interval": "1s"}}))
    log = tmp_path / "flow.log"
    try:
        port = free_port()
        flow = _start(config, log, port)
        try:
            assert wait_until(lambda: _copied(dc2.bootstrap, names) == TOPICS * PARTITIONS * RECORDS, 240), \
                log.read_text()[-3000:]
            # the destination's topics are this flow's alone, so each origin offset keeps its number there
            assert wait_until(lambda: group_positions(dc2.bootstrap, groups) == groups, 180, 2), \
                _missing(dc2.bootstrap, groups) + log.read_text()[-3000:]
            metrics = scrape(port)
            for loop in ("poller", "topics", "lag", "translate"):
                took, period = (value(metrics, f"dr_stream_loop_{m}_seconds", flow=name, loop=loop)
                                for m in ("round", "period"))
                assert took is not None and period is not None and period >= took, (loop, took, period)
            assert value(metrics, "dr_stream_loop_round_items", flow=name, loop="topics") == TOPICS
            assert value(metrics, "dr_stream_groups_synced_total", flow=name, action="committed") >= GROUPS

            # one more record on every partition; the flow dies while it copies them
            for topic in names:
                produce(dc1.bootstrap, topic, ({"value": f"{topic}/late{p}".encode(), "partition": p}
                                               for p in range(PARTITIONS)))
            assert wait_until(lambda: _copied(dc2.bootstrap, names) > TOPICS * PARTITIONS * RECORDS, 120, 0.1), \
                log.read_text()[-3000:]
        finally:
            _kill9(flow)
        partial = _copied(dc2.bootstrap, names)
        flow = _start(config, log, free_port())
        try:
            total = TOPICS * PARTITIONS * (RECORDS + 1)
            assert wait_until(lambda: _copied(dc2.bootstrap, names) >= total, 240), log.read_text()[-3000:]
            time.sleep(3)  # a replayed batch writing twice would do so by now
        finally:
            _stop(flow)
        for topic in names:
            records = consume_all(dc2.bootstrap, topic)
            origins = Counter((r.partition, provenance(r)[-1]["offset"]) for r in records)
            assert len(records) == PARTITIONS * (RECORDS + 1), (topic, len(records), f"{partial} copied at the kill")
            assert set(origins.values()) == {1}, (topic, [o for o, n in origins.items() if n > 1])
            assert all(r.partition == provenance(r)[-1]["partition"] for r in records)
    finally:
        delete_groups(dc1.bootstrap, groups)
        delete_groups(dc2.bootstrap, groups)


def _missing(bootstrap: str, groups: dict[str, dict[tuple[str, int], int]]) -> str:
    """Which groups the destination lacks or holds elsewhere, for a failure message."""
    found = group_positions(bootstrap, groups)
    wrong = [g for g, at in groups.items() if found.get(g) != at]
    return f"{len(wrong)} of {len(groups)} groups not at their positions, e.g. {wrong[:3]}: " \
           f"{[found.get(g) for g in wrong[:1]]}\n"
