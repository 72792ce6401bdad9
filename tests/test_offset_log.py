"""A Spark offset log file read and rewritten: only the Kafka sources' offsets change."""

from __future__ import annotations

import json

import pytest

from dr_stream.core.offset_log import OffsetLogError, batch_ids, kafka_json, kafka_offsets, parse
from dr_stream.operations.application_offsets import TranslatedOffset
from dr_stream.operations.spark_checkpoint import Change, CheckpointError, batches_to_rewrite, renamed

META = '{"batchWatermarkMs":0,"batchTimestampMs":1796347885006,"conf":{"spark.sql.shuffle.partitions":"4"}}'
# what Spark 4.2 wrote for a query joining a Kafka source, the rate source and a file source
V1 = f'v1\n{META}\n{{"orders":{{"0":15,"1":15}}}}\n7\n{{"logOffset":3}}'


def test_a_file_written_by_spark_reads_back_as_written():
    assert parse(V1, "offsets/3").format() == V1
    assert parse(V1 + "\n", "offsets/3").format() == V1 + "\n"


def test_only_the_kafka_sources_offsets_are_kafka_offsets():
    log = parse(V1, "offsets/3")
    assert log.kafka_sources == {0: {("orders", 0): 15, ("orders", 1): 15}}
    assert [s.kafka() for s in log.sources[1:]] == [None, None]


def test_replacing_a_kafka_sources_offsets_changes_that_line_only_in_sparks_compact_shape():
    rewritten = parse(V1, "offsets/3").with_kafka(0, {("dc1.orders", 1): 9, ("dc1.orders", 0): 12}).format()
    assert rewritten.split("\n") == ["v1", META, '{"dc1.orders":{"0":12,"1":9}}', "7", '{"logOffset":3}']


def test_a_version_2_file_keeps_each_sources_name():
    text = f'v2\n{META}\norders:{{"orders":{{"0":4}}}}\nticks:-'
    log = parse(text, "offsets/0")
    assert [s.name for s in log.sources] == ["orders", "ticks"]
    assert log.kafka_sources == {0: {("orders", 0): 4}}
    assert log.with_kafka(0, {("orders", 0): 6}).format() == f'v2\n{META}\norders:{{"orders":{{"0":6}}}}\nticks:-'


@pytest.mark.parametrize("text, says", [
    ("hello\nworld", "not a Spark offset log file"),
    (f"v9\n{META}\n{{}}", "offset log version 9"),
    (f'v1\n{META}\n{{"orders":{{"0":1', "source 0's offset is not JSON"),
    (f'v2\n{META}\n{{"orders":{{"0":1}}}}', "without its source's name"),
])
def test_a_file_spark_did_not_write_is_refused_in_one_line(text, says):
    with pytest.raises(OffsetLogError, match=says) as raised:
        parse(text, "ck/offsets/4")
    assert str(raised.value).startswith("ck/offsets/4: ") and "\n" not in str(raised.value)


def test_kafka_offsets_are_topic_partition_offset_and_nothing_else():
    assert kafka_offsets('{"a":{"0":1,"2":-2}}') == {("a", 0): 1, ("a", 2): -2}
    for other in ('{"logOffset":3}', "7", "-", '{"a":{"x":1}}', '{"a":{"0":true}}', "{}"):
        assert kafka_offsets(other) is None, other
    assert kafka_json({("b", 1): 2, ("a", 10): 1, ("a", 2): 0}) == '{"a":{"2":0,"10":1},"b":{"1":2}}'


def test_the_two_newest_batches_are_rewritten_and_checksums_are_not_batches():
    assert batch_ids(["0", ".0.crc", "12", "3", "12.tmp"]) == [0, 3, 12]
    assert batches_to_rewrite([0, 3, 12]) == [3, 12]
    assert batches_to_rewrite([0]) == [0]
    assert batches_to_rewrite([]) == []


def test_a_position_without_a_destination_offset_refuses_the_rewrite():
    found = TranslatedOffset("orders", 0, 10, "dc1.orders", 7, "exact", "")
    assert renamed([found]) == {("dc1.orders", 0): 7}
    with pytest.raises(CheckpointError, match=r"orders\[1\] at 5 has no destination offset \(none: gone\)"):
        renamed([found, TranslatedOffset("orders", 1, 5, "dc1.orders", None, "none", "gone")])


def test_a_listed_checkpoint_passes_the_drill_only_when_every_offset_would_move_exactly():
    from dr_stream.operations.readiness import FAIL, OK, checkpoint_check

    assert checkpoint_check("f", "hdfs://nn/ck", [], None).state == OK
    inexact = checkpoint_check("f", "hdfs://nn/ck", ["not exact: orders[0] at 10 -> orders[0] at 7 (timestamp)"], None)
    assert (inexact.state, inexact.detail) == (FAIL, "not exact: orders[0] at 10 -> orders[0] at 7 (timestamp)")
    refused = checkpoint_check("f", "/ck", None, "/ck: not a Spark Structured Streaming checkpoint")
    assert (refused.subject, refused.state) == ("f spark checkpoint /ck", FAIL)
    assert refused.detail.startswith("would be refused: /ck: not a Spark")


@pytest.mark.parametrize(("text", "says"), [
    ('{"checkpoint": "/c", "flow": "f"', "not a change record dr-stream wrote (Expecting"),
    ('{"checkpoint": "/c", "flow": "f", "from": {}, "to": {}, "state": "done"}', "(no 'files')"),
    ('["not", "a", "record"]', "not a change record dr-stream wrote"),
    ('{"checkpoint": "/c", "flow": "f", "from": {}, "to": {}, "files": {"offsets/3": 7}, "state": "done"}',
     "its files are not texts"),
])
def test_a_change_record_cut_short_or_edited_is_refused_in_one_line_naming_its_file(text, says):
    with pytest.raises(CheckpointError) as refused:
        Change.read("dr-stream-failover/x", "hdfs://nn/c/dr-stream-failover/x/change.json", text)
    line = str(refused.value)
    assert line.startswith("hdfs://nn/c/dr-stream-failover/x/change.json: ") and says in line and "\n" not in line


def test_a_change_record_dr_stream_wrote_reads_back_as_the_change():
    change = Change("d", "/c", "f", {"alias": "dc1"}, {"alias": "dc2"}, {"offsets/3": "v1\n{}"}, "done")
    assert Change.read("d", "d/change.json", json.dumps(change.as_dict())) == change
