"""The runs topic keeps what the offset index table lacks, not the flow's age: made compacted
with a day's retention, a topic an older release made is given the same configs at the flow's
start, the flow deletes what its table has held a while, and a reader whose start was deleted
reads from the first run still there. (A real broker.)"""

from __future__ import annotations

import pytest

from dr_stream.core.config import ClusterConfig
from dr_stream.index.runs_topic import CONFIGS, RunsReader, ensure_runs_topic, runs_trim, settle_runs_topic
from dr_stream.kafka.cluster_context import ClusterContext
from tests.kafka_tools import admin, create_topic, delete_records_before, delete_topics, produce, topic_config, unique

pytestmark = pytest.mark.integration


def test_a_new_runs_topic_is_compacted_and_deletes_runs_older_than_a_day(dc2):
    topic = unique("__dr_stream_runs.new-")
    try:
        assert ensure_runs_topic(admin(dc2.bootstrap), topic)
        found = topic_config(dc2.bootstrap, topic)
        assert {k: found.get(k) for k in CONFIGS} == CONFIGS
        assert found["cleanup.policy"] == "compact,delete" and found["retention.ms"] == str(24 * 3600 * 1000)
        assert settle_runs_topic(admin(dc2.bootstrap), topic) == {}
    finally:
        delete_topics(dc2.bootstrap, [topic])


def test_a_runs_topic_an_older_release_made_is_given_this_ones_configs_once(dc2):
    topic = unique("__dr_stream_runs.old-")
    create_topic(dc2.bootstrap, topic, partitions=1, config={"cleanup.policy": "compact",
                                                             "min.compaction.lag.ms": str(24 * 3600 * 1000),
                                                             "segment.ms": str(3600 * 1000)})
    try:
        assert settle_runs_topic(admin(dc2.bootstrap), topic) == {
            "cleanup.policy": "compact,delete", "retention.ms": str(24 * 3600 * 1000), "min.compaction.lag.ms": "0",
            "segment.ms": str(60 * 1000)}
        found = topic_config(dc2.bootstrap, topic)
        assert {k: found.get(k) for k in CONFIGS} == CONFIGS
        assert settle_runs_topic(admin(dc2.bootstrap), topic) == {}
    finally:
        delete_topics(dc2.bootstrap, [topic])


def test_a_reader_whose_start_was_deleted_reads_from_the_first_run_still_there(dc2):
    topic = unique("__dr_stream_runs.gone-")
    create_topic(dc2.bootstrap, topic, partitions=1)
    try:
        produce(dc2.bootstrap, topic, ({"key": f"k{i}".encode(), "value": b"not a run", "partition": 0}
                                       for i in range(10)))
        delete_records_before(dc2.bootstrap, topic, 0, 6)
        reader = RunsReader(ClusterContext(ClusterConfig("dc2", dc2.bootstrap)), topic, start=2)
        try:
            got = reader.read_to_end(timeout=30)
        finally:
            reader.close()
        assert (got.malformed, got.position) == (4, 10)  # offsets 6-9, not a jump to the end
    finally:
        delete_topics(dc2.bootstrap, [topic])


def test_the_flow_deletes_the_runs_its_table_held_a_while_ago_and_a_reader_sees_the_trim(dc2):
    topic = unique("__dr_stream_runs.trim-")
    create_topic(dc2.bootstrap, topic, partitions=1)
    said: list[str] = []
    try:
        produce(dc2.bootstrap, topic, ({"key": f"k{i}".encode(), "value": b"not a run", "partition": 0}
                                       for i in range(10)))
        trim = runs_trim(admin(dc2.bootstrap), topic, ClusterConfig("dc2", dc2.bootstrap), said.append)
        trim.after_s = 0.0
        trim.appended(6)

        trim.trim()

        reader = RunsReader(ClusterContext(ClusterConfig("dc2", dc2.bootstrap)), topic, start=3)
        try:
            assert reader.deleted_past_start() == 7
            reader.position = 7
            assert reader.deleted_past_start() is None
        finally:
            reader.close()
        assert (trim.trimmed_through, said) == (6, [])
    finally:
        delete_topics(dc2.bootstrap, [topic])
