"""A command reads the runs its lookups need, not the offset index whole, and answers the same:
`needed_runs_sql` through delta-rs (the commands' reader) and through Spark (its fallback)."""

from __future__ import annotations

import random

import pytest
from deltalake import write_deltalake

from dr_stream.index.index_reads import IndexReads, needed_runs_sql
from dr_stream.index.index_table import RUN_SCHEMA
from dr_stream.index.run_store import Run, RunStore
from dr_stream.runtime.delta_appends import arrow_table
from dr_stream.runtime.delta_reads import DeltaReads

T0 = 1_767_225_600_000


def transactional_runs(cluster: str, topic: str, partition: int, count: int, rng: random.Random) -> list[Run]:
    """A run per transaction: a commit marker's origin offset between two."""
    runs, origin, dest = [], 0, 0
    for _ in range(count):
        n = rng.randint(1, 8)
        runs.append(Run(cluster, topic, partition, topic, partition, origin, origin + n - 1, dest, dest + n - 1,
                        T0, T0, T0))
        origin, dest = origin + n + 1, dest + n
    return runs


def _index(tmp_path, runs: list[Run]) -> IndexReads:
    path = str(tmp_path / "offset-index")
    write_deltalake(path, arrow_table(RUN_SCHEMA, [
        (r.origin_cluster, r.origin_topic, r.origin_partition, r.dest_topic, r.dest_partition, r.origin_start,
         r.origin_end, r.dest_start, r.dest_end, r.records, r.first_timestamp, r.last_timestamp, r.copied_at, None)
        for r in runs]))
    return IndexReads(path, DeltaReads())


def _estate(rng: random.Random) -> list[Run]:
    runs = [*transactional_runs("c1", "orders", 0, 300, rng), *transactional_runs("c1", "orders", 1, 200, rng),
            *transactional_runs("c1", "payments", 0, 100, rng), *transactional_runs("c2", "orders", 0, 50, rng)]
    # a restart copied origin 5-9 of payments[1] after 10-19, which it had copied before
    runs += [Run("c1", "payments", 1, "payments", 1, 10, 19, 0, 9, T0, T0, T0),
             Run("c1", "payments", 1, "payments", 1, 5, 9, 10, 14, T0, T0, T0)]
    return runs


def test_the_runs_a_lookup_needs_place_every_asked_offset_as_the_whole_index_does(tmp_path):
    rng = random.Random(3)
    runs = _estate(rng)
    index = _index(tmp_path, runs)
    whole = RunStore(r for r in runs if r.origin_cluster == "c1")
    # orders[0]: the last offset of a run (the run must come); orders[1]: past every copy (where the
    # copy stands must come); payments[1]: copied out of order; payments[0]: not asked
    last_of_a_run = [r.origin_end for r in runs if r.key == ("orders", 0, "orders", 0)][250]
    asked = {("orders", 0): last_of_a_run, ("orders", 1): 1_000_000, ("payments", 1): 7}

    needed = index.store("c1", asked)

    assert len(needed) < len(whole) / 3, "a lookup near the end reads a sliver of the table"
    for (topic, partition), lowest in asked.items():
        key = (topic, partition, topic, partition)
        for offset in (lowest, lowest + 1, lowest + 17, lowest + 400, 10**9):
            assert needed.locate(key, offset) == whole.locate(key, offset), (key, offset)
    assert needed.last_copied() == whole.last_copied()
    bounds = {(t, p): (0, 10**6) for t in ("orders", "payments") for p in (0, 1)}
    assert needed.uncovered(bounds) == whole.uncovered(bounds)


def test_no_offset_asked_reads_where_each_partition_copy_stands(tmp_path):
    runs = _estate(random.Random(5))
    index = _index(tmp_path, runs)

    newest = index.store(None, {})

    assert newest.last_copied() == RunStore(runs).last_copied()
    assert len(newest) <= 2 * 5  # at most two runs per key: newest on the destination, furthest in origin
    assert index.store(None, None).last_copied() == RunStore(runs).last_copied()
    assert len(index.store("c2", None)) == 50


def test_a_name_that_is_not_kafkas_never_reaches_the_query_and_the_answer_stays_exact(tmp_path):
    with pytest.raises(ValueError, match="not a cluster id"):
        needed_runs_sql("c1' OR '1'='1", {})
    assert "evil" not in needed_runs_sql("c1", {("evil'; --", 0): 5, ("orders", 0): 5})
    rng = random.Random(11)
    runs = [*_estate(rng), *transactional_runs("c1", "it's", 0, 40, rng)]
    whole = RunStore(r for r in runs if r.origin_cluster == "c1")

    read = _index(tmp_path, runs).store("c1", {("it's", 0): 5, ("orders", 0): 5})

    # the partition whose name cannot stand in the query is still placed from the run holding its offset
    key = ("it's", 0, "it's", 0)
    assert read.locate(key, 5) == whole.locate(key, 5) and read.locate(key, 5).method == "exact"
    assert read.locate(key, 5).offset < whole.last(key).dest_start


def test_spark_reads_the_same_runs_as_delta_rs(spark, tmp_path):
    runs = _estate(random.Random(7))
    index = _index(tmp_path, runs)
    sql = needed_runs_sql("c1", {("orders", 0): 500, ("payments", 1): 0})
    spark.read.format("delta").load(index.path).createOrReplaceTempView("t")

    through_spark = sorted(tuple(r) for r in spark.sql(sql).select("origin_topic", "origin_partition", "origin_start",
                                                                   "dest_start").collect())
    through_delta_rs = sorted((r["origin_topic"], r["origin_partition"], r["origin_start"], r["dest_start"])
                              for r in index.reads.query(index.path, sql))
    assert through_spark == through_delta_rs and len(through_spark) > 10
