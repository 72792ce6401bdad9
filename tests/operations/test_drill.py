"""`dr-stream drill` on real brokers with a running flow: ready when everything a failover needs
is in place, and otherwise non-zero with each failing topic and group named on its own line."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import replace

import pytest

from dr_stream.background import Background
from dr_stream.core.config import DrillConfig
from tests.flows import flow_config, flow_file, running_flow
from tests.kafka_tools import (
    committed,
    consume_and_commit,
    create_topic,
    forget_prefixed,
    group_state,
    produce,
    stay_subscribed,
    unique,
    wait_until,
)


@pytest.fixture(scope="module")
def flow(spark, dc1, dc2, tmp_path_factory):
    config = flow_config(dc1, dc2, tmp_path_factory.mktemp("drill"), name="drill-dc1-to-dc2",
                         topics={"include": [r"drill\..*"]}, offsets={"groups": {"include": ["dg-.*"]}},
                         metrics={"sample_interval": "1s", "health_window": "20s"})
    with running_flow(spark, config) as running:
        yield running
    for cluster in (dc1, dc2):
        forget_prefixed(cluster.bootstrap, "drill.", "dg-")


def copied_and_committed(flow, dc1, dc2, name: str, partitions: int, commits: dict[int, int]) -> tuple[str, str]:
    topic, group = unique(f"drill.{name}."), unique(f"dg-{name}-")
    create_topic(dc1.bootstrap, topic, partitions=partitions)
    produce(dc1.bootstrap, topic, ({"key": f"k{i}".encode(), "value": b"v", "partition": i % partitions}
                                   for i in range(100 * partitions)))
    assert wait_until(lambda: all(flow.feed.last_copied().get((topic, p), -1) >= 99 for p in range(partitions)), 120)
    consume_and_commit(dc1.bootstrap, topic, group, commits, helper=False)
    return topic, group


def drill(config_file: str, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dr_stream.cli", "drill", "--config", config_file, *options],
                          capture_output=True, text=True, timeout=300)


def selecting(flow, directory, topic: str, group: str, **sections) -> str:
    """The flow's file narrowed to one topic and group: the drill judges what its file selects."""
    return flow_file(flow.config, directory, topics={"include": [topic.replace(".", r"\.")]},
                     offsets={"groups": {"include": [group]}}, metrics={"health_window": "20s"}, **sections)


def test_a_flow_with_its_topic_copied_and_its_group_translated_is_ready(flow, dc1, dc2, tmp_path):
    topic, group = copied_and_committed(flow, dc1, dc2, "ready", 2, {0: 40, 1: 70})
    # the flow synced the group: its translation is recorded and the destination holds it
    assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 2) == {0: 40, 1: 70}, 60)

    done = drill(selecting(flow, tmp_path, topic, group), "--json", "--rpo-seconds", "30")

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    verdict = json.loads(done.stdout)
    states = {(c["area"], c["subject"]): c["state"] for c in verdict["checks"]}
    assert verdict["ready"] and verdict["failures"] == []
    assert states[("topics", topic)] == states[("lag", topic)] == "ok"
    assert states[("translation", group)] == states[("failover", group)] == "ok"
    assert states[("flow", "drill-dc1-to-dc2")] == "ok"
    assert states[("acls", "drill-dc1-to-dc2")] == "skipped"
    # the dry run changed nothing
    assert committed(dc2.bootstrap, group, topic, 2) == {0: 40, 1: 70}


def test_a_partition_mismatch_and_a_group_busy_on_the_destination_are_each_named(flow, dc1, dc2, tmp_path):
    topic, group = unique("drill.bad."), unique("dg-bad-")
    create_topic(dc2.bootstrap, topic, partitions=3)  # the copy has one partition more than the source
    create_topic(dc1.bootstrap, topic, partitions=2)
    produce(dc1.bootstrap, topic, ({"key": b"k", "value": b"v", "partition": i % 2} for i in range(200)))
    assert wait_until(lambda: all(flow.feed.last_copied().get((topic, p), -1) >= 99 for p in range(2)), 120)
    consume_and_commit(dc1.bootstrap, topic, group, {0: 50, 1: 50}, helper=False)
    stop = threading.Event()
    member = Background(f"member of {group}", lambda: stay_subscribed(dc2.bootstrap, topic, group, stop)).start()
    try:
        assert wait_until(lambda: member.check() or group_state(dc2.bootstrap, group) == "STABLE", 60)

        done = drill(selecting(flow, tmp_path, topic, group))
    finally:
        stop.set()
        member.join(timeout=30)

    print(done.stdout)
    assert done.returncode == 2, done.stdout + done.stderr
    failures = [line for line in done.stderr.splitlines() if line.startswith("dr-stream: drill: ")]
    assert f"dr-stream: drill: topics {topic}: dc2 has 3 partitions, dc1 has 2" in failures
    assert any(line.startswith(f"dr-stream: drill: failover {group}: ") and "skipped: group is STABLE" in line
               for line in failures), failures
    assert f"verdict: flow drill-dc1-to-dc2 is NOT READY for failover: {len(failures)} of" in done.stdout


def test_a_flow_that_is_not_running_is_not_ready(flow, dc1, dc2, tmp_path):
    topic, group = copied_and_committed(flow, dc1, dc2, "stopped", 1, {0: 10})
    # the same tables under a flow name no running flow records lag samples for
    config_file = selecting(flow, tmp_path, topic, group, name="drill-stopped")

    done = drill(config_file, "--json")

    assert done.returncode == 2, done.stderr[-2000:]
    assert json.loads(done.stdout)["failures"][0] == (
        "flow drill-stopped: recorded no lag sample in the last 20 s: it is not running")


def test_the_running_flow_drills_itself_logs_a_change_of_verdict_and_exports_it(flow, dc1, dc2):
    from dr_stream.operations.drill_schedule import DrillSchedule
    from tests.kafka_tools import add_partitions
    from tests.replication.test_flow_metrics import scrape

    topic, group = copied_and_committed(flow, dc1, dc2, "self", 1, {0: 30})
    assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 1) == {0: 30}, 60)
    c = flow.config
    config = replace(c, topics=replace(c.topics, include=(topic.replace(".", r"\."),)),
                     offsets=replace(c.offsets, groups=replace(c.offsets.groups, include=(group,))),
                     drill=DrillConfig(interval_s=3600))
    lines: list[str] = []
    schedule = DrillSchedule(config, flow.metrics, log=lines.append)
    ready_label = ("dr_stream_drill_ready", (("flow", c.name), ("result", "last")))

    assert schedule.drill_once().ready, lines
    assert scrape(flow.metrics)[ready_label] == 1.0
    assert lines == ["drill: ready for failover (10 checks)"]
    schedule.drill_once()
    assert len(lines) == 1  # the same verdict is not said again

    add_partitions(dc2.bootstrap, topic, 2)
    assert not schedule.drill_once().ready
    assert scrape(flow.metrics)[ready_label] == 0.0
    assert scrape(flow.metrics)[("dr_stream_drill_failures", (("check", "topics"), ("flow", c.name)))] == 1.0
    assert lines[1:] == [f"drill: NOT READY: topics {topic}: dc2 has 2 partitions, dc1 has 1"]
