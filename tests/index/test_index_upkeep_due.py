"""When the index feed runs the offset index's upkeep: only when it has something to do.

The upkeep is a few Spark jobs of seconds each on a small driver; run every minute regardless, it
took CPU from the copy every minute. The look that decides is in memory and one request for
log starts."""

from __future__ import annotations

from dr_stream.core.config import ClusterConfig
from dr_stream.core.policy import TopicRenamer
from dr_stream.index.index_feed import IndexFeed
from dr_stream.index.run_store import Run
from dr_stream.kafka.cluster_context import ClusterContext

NOWHERE = ClusterContext(ClusterConfig("dc2", "127.0.0.1:1"))  # never connected: the feed is not started


def feed(log_start: int = 0, merge_after_rows: int = 10) -> tuple[IndexFeed, list]:
    upkeeps: list = []
    f = IndexFeed(spark=None, index=None, destination=NOWHERE, runs_topic="r",
                  source_cluster_id="src", header="__replicator_id", renamer=TopicRenamer(),
                  dest_bounds=lambda: {("t", 0): (log_start, 10_000)}, merge_after_rows=merge_after_rows)
    f._keep_table = lambda bounds, floors: upkeeps.append(bounds)  # the Spark part is tested on real tables
    return f, upkeeps


def test_a_table_with_few_unmerged_rows_and_nothing_deleted_gets_no_upkeep():
    f, upkeeps = feed()
    f._take([(1, Run("src", "t", 0, "t", 0, 0, 99, 0, 99))], 0)
    f._rows_unmerged = 5
    f.maintain_if_due()
    assert upkeeps == []


def test_enough_unmerged_rows_bring_the_upkeep():
    f, upkeeps = feed()
    f._rows_unmerged = 10
    f.maintain_if_due()
    assert len(upkeeps) == 1


def test_records_the_destination_deleted_bring_the_upkeep_until_it_has_run():
    f, upkeeps = feed(log_start=500)
    f._take([(1, Run("src", "t", 0, "t", 0, 0, 99, 0, 99))], 0)
    f.maintain_if_due()
    f.maintain_if_due()  # the first upkeep failed (nothing reset): the table still holds the run
    assert len(upkeeps) == 2
