"""Provenance look-ups at single consumed records (the Column form is tested with the record path)."""

from __future__ import annotations

from dr_stream.core.provenance import entries, newest_entry, origin_offset

HEADER = "__replicator_id"
A = b'{"cluster": "A", "topic": "t", "partition": 0, "offset": 7, "timestamp": 1}'
B = b'{"cluster": "B", "topic": "t", "partition": 0, "offset": 3, "timestamp": 2}'


def test_entries_are_in_hop_order_and_other_headers_are_ignored():
    assert [e["cluster"] for e in entries([(HEADER, A), ("other", b"x"), (HEADER, B)], HEADER)] == ["A", "B"]


def test_a_value_that_is_not_a_json_object_is_none_in_its_place():
    assert entries([(HEADER, b"{oops"), (HEADER, b"[1]"), (HEADER, None), (HEADER, A)], HEADER)[:3] == [None] * 3


def test_the_newest_entry_is_the_last_hop_or_none():
    assert newest_entry([(HEADER, A), (HEADER, B)], HEADER)["cluster"] == "B"
    assert newest_entry([("other", A)], HEADER) is None
    assert newest_entry(None, HEADER) is None


def test_origin_offset_only_for_the_exact_cluster_topic_and_partition():
    entry = newest_entry([(HEADER, A)], HEADER)
    assert origin_offset(entry, "A", "t", 0) == 7
    assert origin_offset(entry, "B", "t", 0) is None
    assert origin_offset(entry, "A", "u", 0) is None
    assert origin_offset(entry, "A", "t", 1) is None
    assert origin_offset({"cluster": "A", "topic": "t", "partition": 0, "offset": "7"}, "A", "t", 0) is None
    assert origin_offset(None, "A", "t", 0) is None
