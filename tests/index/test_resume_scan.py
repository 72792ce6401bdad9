"""A (re)start reads the destination past the offset index for copies no run reported, within a
deadline: past it, those partitions are reported and resume from the index's marks
(at-least-once there), never taken as holding nothing; within it, every copy is found."""

from __future__ import annotations

import json

import pytest

from dr_stream.core.config import ClusterConfig
from dr_stream.core.policy import TopicRenamer
from dr_stream.index.index_feed import IndexFeed
from dr_stream.index.index_table import OffsetIndex
from dr_stream.kafka.cluster_context import ClusterContext
from tests.kafka_tools import create_topic, delete_topics, produce, unique

pytestmark = pytest.mark.integration
PER_PARTITION = 20_000


@pytest.fixture
def copied_without_runs(dc2):
    """A destination topic holding copies of source `src` whose runs were never published."""
    topic, runs_topic = unique("scan."), unique("__dr_stream_runs.scan-")
    create_topic(dc2.bootstrap, topic, 2)
    create_topic(dc2.bootstrap, runs_topic, 1)

    def copy(i: int) -> dict:
        origin = {"cluster": "src", "topic": topic, "partition": i % 2, "offset": i // 2, "timestamp": 1}
        return {"value": b"v", "partition": i % 2, "headers": [("__replicator_id", json.dumps(origin).encode())]}

    produce(dc2.bootstrap, topic, (copy(i) for i in range(2 * PER_PARTITION)))
    yield topic, runs_topic
    delete_topics(dc2.bootstrap, [topic, runs_topic])


def feed(spark, dc2, tmp_path, topic: str, runs_topic: str, timeout_s: float, said: list[str]) -> IndexFeed:
    f = IndexFeed(spark=spark, index=OffsetIndex(spark, str(tmp_path / "index")),
                  destination=ClusterContext(ClusterConfig("dc2", dc2.bootstrap)), runs_topic=runs_topic,
                  source_cluster_id="src",
                  header="__replicator_id", renamer=TopicRenamer(),
                  dest_bounds=lambda: {(topic, 0): (0, PER_PARTITION), (topic, 1): (0, PER_PARTITION)},
                  log=said.append, scan_timeout_s=timeout_s)
    f.load()
    return f


def test_a_scan_past_its_deadline_leaves_its_partitions_unscanned_and_says_so(spark, dc2, tmp_path,
                                                                              copied_without_runs):
    topic, runs_topic = copied_without_runs
    said: list[str] = []
    late = feed(spark, dc2, tmp_path, topic, runs_topic, 0.05, said)
    advanced: list[str] = []
    late.on_advanced = lambda: advanced.append("late")
    late.catch_up()
    assert late.unscanned == {(topic, 0): (0, PER_PARTITION), (topic, 1): (0, PER_PARTITION)}
    assert late.last_copied() == {}
    assert [line for line in said if "were not read within" in line] == [
        f"offset index: the destination's records past the last known run of 2 partitions "
        f"({2 * PER_PARTITION} records) were not read within 0.05 s; those partitions resume from the index's marks"]

    said.clear()
    in_time = feed(spark, dc2, tmp_path, topic, runs_topic, 60, said)
    in_time.on_advanced = lambda: advanced.append("in time")
    in_time.catch_up()
    # a position waiting for these copies (a group that committed before the restart) is translated now
    assert advanced == ["in time"]
    assert in_time.unscanned == {}
    assert in_time.last_copied() == {(topic, 0): PER_PARTITION - 1, (topic, 1): PER_PARTITION - 1}
    assert any("rebuilt" in line for line in said), said
