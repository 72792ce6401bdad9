"""A restart copies the records a failed write left out below the last copy, once, and writes
nothing twice (real brokers, real Spark)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dr_stream.core.contracts import PROVENANCE_HEADER
from dr_stream.replication.checkpoint_positions import next_to_read, offset_log_positions
from tests.flows import flow_config, running_flow
from tests.kafka_tools import (
    consume_all,
    count,
    create_topic,
    delete_records_before,
    delete_topics,
    produce,
    topic_exists,
    unique,
    wait_until,
)
from tests.replication.test_flow_metrics import scrape

pytestmark = pytest.mark.integration


def back_to(checkpoint: str, key: tuple[str, int], end: int) -> list[int]:
    """Takes the checkpoint back to its newest batch ending at or before `end` of `key`, as a crash
    leaves it when the later batches' writes were sent but their progress was not logged; the
    batch ids dropped."""
    offsets = Path(checkpoint) / "offsets"
    dropped = [int(f.name) for f in offsets.iterdir() if f.name.isdigit()
               and offset_log_positions(f.read_text()).get(key, 0) > end]
    for batch in dropped:
        for log in ("offsets", "commits"):
            for name in (str(batch), f".{batch}.crc"):
                (Path(checkpoint) / log / name).unlink(missing_ok=True)
    return dropped


def test_records_not_written_below_the_last_copy_are_copied_at_the_restart_once_and_nothing_is_written_twice(
        spark, dc1, dc2, tmp_path):
    topic = unique("unwritten.")
    create_topic(dc1.bootstrap, topic, partitions=1)
    sections = {"topics": {"include": [re.escape(topic)]}, "streaming": {"max_records_per_batch": 50}}
    config = flow_config(dc1, dc2, tmp_path, name="unwritten", **sections)
    produce(dc1.bootstrap, topic, ({"value": str(i).encode()} for i in range(50)))
    # 50-99 name as their originals dc2 records that retention has since deleted, so this flow
    # takes them as come back (nothing can tell it otherwise) and filters them out; 100-149 are
    # copied past them
    create_topic(dc2.bootstrap, topic, partitions=1)
    produce(dc2.bootstrap, topic, ({"value": b"deleted"} for _ in range(50)))
    delete_records_before(dc2.bootstrap, topic, 0, 50)
    entry = {"cluster": dc2.cluster_id(), "topic": topic, "partition": 0, "timestamp": 0}
    came_back = ({"value": str(i).encode(),
                  "headers": [(PROVENANCE_HEADER, json.dumps({**entry, "offset": i - 50}))]}
                 for i in range(50, 100))
    lines: list[str] = []
    try:
        with running_flow(spark, config, log=lines.append):
            assert wait_until(lambda: topic_exists(dc2.bootstrap, topic) and count(dc2.bootstrap, topic) == 50, 120)
            assert wait_until(lambda: next_to_read(spark, config.replicate_checkpoint) == {(topic, 0): 50}, 60)
            produce(dc1.bootstrap, topic, came_back)
            produce(dc1.bootstrap, topic, ({"value": str(i).encode()} for i in range(100, 150)))
            assert wait_until(lambda: count(dc2.bootstrap, topic) == 100, 120)
        # Progress is logged asynchronously (at most once a second, as batches end), so the last
        # batches before the stop may be unlogged already: the same state as dropping them here.
        back_to(config.replicate_checkpoint, (topic, 0), 50)
        assert next_to_read(spark, config.replicate_checkpoint) == {(topic, 0): 50}
        # Restarted with 50-99 let through, they are records below the last copy (149) that are
        # not on the destination: what a batch the producer failed, behind which it wrote
        # others, leaves. Skipping through the last copy would lose them.
        let_through = {"filter_overrides": [{"cluster": re.escape(dc2.cluster_id()), "topic": re.escape(topic)}]}
        restarted = flow_config(dc1, dc2, tmp_path, name="unwritten", provenance=let_through, **sections)
        with running_flow(spark, restarted, log=lines.append) as flow:
            assert wait_until(lambda: count(dc2.bootstrap, topic) >= 150, 120), lines[-10:]
            assert scrape(flow.metrics)[("dr_stream_partitions_reread_total", (("flow", "unwritten"),))] == 1
            produce(dc1.bootstrap, topic, ({"value": str(i).encode()} for i in range(150, 160)))
            assert wait_until(lambda: count(dc2.bootstrap, topic) >= 160, 60), lines[-10:]
        values = [int(r.value) for r in consume_all(dc2.bootstrap, topic)]
        assert sorted(values) == list(range(160)), "every record once"
        # the ones written before the restart keep their places; the others follow, in order
        assert values == [*range(50), *range(100, 150), *range(50, 100), *range(150, 160)]
        said = [line for line in lines if "below their last copy" in line]
        assert len(said) == 1 and f"{topic}[0] from 50 (last copied 149)" in said[0], lines[-20:]
        assert "1 partition(s)" in said[0] and "the 50 records copied past them are not written twice" in said[0]
    finally:
        delete_topics(dc1.bootstrap, [topic])
        delete_topics(dc2.bootstrap, [topic])
