"""How far the copy is complete, as the index feed learns it: from runs and from batch progress.

Real-time mode ends a batch every 30 s, so a translation at the head cannot wait for one: a
published run ending at origin offset E says that everything below E+1 was handled, since the
copy reads each partition in offset order."""

from __future__ import annotations

from dr_stream.core.config import ClusterConfig
from dr_stream.core.policy import TopicRenamer
from dr_stream.index.index_feed import IndexFeed
from dr_stream.index.run_store import Run
from dr_stream.kafka.cluster_context import ClusterContext

NOWHERE = ClusterContext(ClusterConfig("dc2", "127.0.0.1:1"))  # never connected: the feed is not started

KEY = ("t", 0, "t", 0)


def feed() -> IndexFeed:
    # No I/O until load/catch_up/step: the rule is exercised on the store alone.
    return IndexFeed(spark=None, index=None, destination=NOWHERE, runs_topic="r",
                     source_cluster_id="src", header="__replicator_id", renamer=TopicRenamer(),
                     dest_bounds=dict)


def test_a_published_run_makes_the_offset_after_it_final_without_a_batch_end():
    f = feed()
    f._take([(7, Run("src", "t", 0, "t", 0, 100, 199, 1000, 1099))], 0)
    located = f.locate(KEY, 200)
    assert (located.offset, located.method) == (1100, "next")
    assert f.locate(KEY, 150).method == "exact"


def test_an_offset_past_the_last_run_waits_until_a_batch_says_its_records_were_handled():
    f = feed()
    f._take([(7, Run("src", "t", 0, "t", 0, 100, 199, 1000, 1099))], 0)
    assert f.locate(KEY, 205).method == "waiting"  # 200..204 may be skipped loops or still on their way


def test_runs_rebuilt_from_the_destination_say_nothing_about_progress():
    f = feed()
    f._take([(None, Run("src", "t", 0, "t", 0, 100, 199, 1000, 1099))], 0)
    assert f.locate(KEY, 200).method == "waiting"
