"""Copies at the end of the destination turned into runs (the rule, without a broker)."""

from __future__ import annotations

import json

from dr_stream.core.policy import TopicRenamer
from dr_stream.index.destination_tail import runs_of_records

H = "__replicator_id"


def copy(offset, origin, cluster="src", topic="t", partition=0):
    entry = {"cluster": cluster, "topic": topic, "partition": partition, "offset": origin, "timestamp": 5}
    return ("t", 0, offset, 1000 + offset, [("app", b"x"), (H, json.dumps(entry).encode())])


def local(offset):
    return ("t", 0, offset, 1000 + offset, None)


def spans(runs):
    return [(r.origin_start, r.origin_end, r.dest_start, r.dest_end) for r in runs]


def test_consecutive_copies_make_one_run_and_local_records_split_it():
    records = [copy(10, 0), copy(11, 1), local(12), copy(13, 2), copy(14, 3)]
    assert spans(runs_of_records(records, H, "src", TopicRenamer())) == [(0, 1, 10, 11), (2, 3, 13, 14)]


def test_copies_from_another_cluster_or_topic_are_not_this_flow_s():
    records = [copy(10, 0, cluster="other"), copy(11, 1, topic="elsewhere"), copy(12, 2)]
    assert spans(runs_of_records(records, H, "src", TopicRenamer())) == [(2, 2, 12, 12)]


def test_a_renamed_destination_topic_matches_its_origin_topic():
    records = [("dc1.t", 0, 7, 1, [(H, json.dumps({"cluster": "src", "topic": "t", "partition": 0,
                                                  "offset": 3, "timestamp": 1}).encode())])]
    runs = runs_of_records(records, H, "src", TopicRenamer("dc1.${topic}"))
    assert [(r.origin_topic, r.dest_topic, r.origin_start, r.dest_start) for r in runs] == [("t", "dc1.t", 3, 7)]
