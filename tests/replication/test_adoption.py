"""The rules of `adopt` that need no cluster: a partition's walk as the index and the record hold it."""

from __future__ import annotations

import json

from dr_stream.replication.adoption import PartitionWalk, adopted_record, adopted_start, resume_offsets, walk_line


def walk(runs, **counts) -> PartitionWalk:
    doc = {"dest_start": 0, "dest_end": 120, "source_start": 0, "source_end": 100, "records": 120, "kept": 100,
           "duplicates": 20, "unmatched": 0, "uncopied": 0, "unread": False, "grew": False, "runs": runs,
           "unmatched_ranges": [], "uncopied_ranges": [], **counts}
    return PartitionWalk.of("orders", "dc1.orders", 2, json.dumps(doc))


def test_copying_resumes_one_past_the_last_copy_paired():
    w = walk([[0, 39, 0, 39, 1000, 1039], [40, 99, 60, 119, 1040, 1099]])
    assert w.resume_at == 100 and w.origin_range == (0, 99)
    assert w.exact


def test_a_partition_with_nothing_paired_resumes_nowhere_and_is_copied_by_the_flow():
    w = walk([], kept=0, records=0)
    assert w.resume_at is None
    assert "copied from the start" in walk_line(w)


def test_paired_copies_become_one_to_one_runs_of_the_same_partition_and_a_trimmed_end_has_no_time():
    runs = walk([[0, 39, 0, 39, 1000, -1], [40, 99, 60, 119, 1040, 1099]]).index_runs("cluster-a")
    assert [(r.origin_start, r.origin_end, r.dest_start, r.dest_end) for r in runs] == [
        (0, 39, 0, 39), (40, 99, 60, 119)]
    assert {(r.origin_cluster, r.origin_topic, r.origin_partition, r.dest_topic, r.dest_partition) for r in runs} == {
        ("cluster-a", "orders", 2, "dc1.orders", 2)}
    assert runs[0].last_timestamp is None and runs[1].last_timestamp == 1099
    assert all(r.copies is None for r in runs)


def test_unmatched_and_uncopied_records_are_said_with_their_offsets_and_make_the_walk_inexact():
    w = walk([[0, 9, 0, 9, 1, 2], [15, 99, 12, 96, 3, 4]], unmatched=2, uncopied=5,
             unmatched_ranges=[[10, 11]], uncopied_ranges=[[10, 14, 5]])
    line = walk_line(w)
    assert not w.exact
    assert "2 unmatched at destination offsets 10..11" in line
    assert "5 source records it never copied (origin offsets 10..14)" in line
    assert line.endswith("copying resumes at origin offset 100")


def test_the_record_holds_each_partitions_resume_offset_and_reads_back_the_same():
    text = adopted_record("mirrormaker2", [walk([[0, 99, 0, 99, 1, 2]])], "0.1.0", 5)
    assert json.loads(text)["from"] == "mirrormaker2"
    assert resume_offsets(text) == {("orders", 2): 100}
    assert resume_offsets(None) == {}


def test_a_first_start_reads_adopted_partitions_from_where_they_resume_and_the_rest_as_the_flow_says():
    resume = {("orders", 1): 100}
    assert json.loads(adopted_start({"orders": 2, "payments": 1}, resume, earliest=True) or "") == {
        "orders": {"0": -2, "1": 100}, "payments": {"0": -2}}
    assert json.loads(adopted_start({"orders": 2}, resume, earliest=False) or "") == {"orders": {"0": -1, "1": 100}}
    assert adopted_start({"payments": 1}, resume, earliest=True) is None
