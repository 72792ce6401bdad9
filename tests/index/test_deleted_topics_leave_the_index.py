"""A topic deleted on both clusters leaves a running flow's offset index: the driver's store and
the Delta table hold none of its runs after two upkeeps, and the topics that remain keep theirs.
(Real brokers, real Spark.)"""

from __future__ import annotations

import pytest

from dr_stream.index.index_reads import IndexReads
from dr_stream.runtime.delta_reads import DeltaReads
from tests.flows import flow_config, running_flow
from tests.kafka_tools import count, create_topic, delete_topics, produce, unique, wait_until

pytestmark = pytest.mark.integration


def test_a_deleted_topics_runs_leave_the_store_and_the_table_and_the_others_stay(spark, dc1, dc2, topics, tmp_path):
    gone, kept = unique("del.gone."), unique("del.kept.")
    topics.extend([gone, kept])
    for topic in (gone, kept):
        create_topic(dc1.bootstrap, topic, 2)
        produce(dc1.bootstrap, topic, ({"value": f"{topic}-{i}".encode(), "partition": i % 2} for i in range(40)))
    config = flow_config(dc1, dc2, tmp_path, topics={"include": [r"del\..*"]})
    lines: list[str] = []
    with running_flow(spark, config, log=lines.append) as flow:
        feed = flow.feed
        assert feed is not None
        assert wait_until(lambda: count(dc2.bootstrap, gone) == 40 and count(dc2.bootstrap, kept) == 40, 90)
        assert wait_until(lambda: feed.store.destinations() == {(t, p) for t in (gone, kept) for p in (0, 1)}, 30)
        feed.write()
        delete_topics(dc1.bootstrap, [gone])
        delete_topics(dc2.bootstrap, [gone])

        feed.maintain()
        assert (gone, 0) in feed.store.destinations(), "one look that misses a partition drops nothing"
        feed.maintain()

        assert feed.store.destinations() == {(kept, 0), (kept, 1)}
        assert any("2 destination partitions of deleted topics forgotten (2 runs)" in line and gone in line
                   for line in lines), lines
    rows = IndexReads(config.streaming.offset_index, DeltaReads()).runs(dc1.cluster_id())
    assert {(r.dest_topic, r.dest_partition) for r in rows} == {(kept, 0), (kept, 1)}
