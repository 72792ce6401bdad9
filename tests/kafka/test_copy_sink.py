"""dr-stream's sink (jvm/ io.drstream.spark.CopySink) writing rows in the Kafka source's schema to a
real broker: what a copy keeps, what it gains (this hop's provenance header, last), where it goes,
the runs it reports, a refused record's origin, and the options it refuses."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

from dr_stream.core.config import ClusterConfig
from dr_stream.core.contracts import COPY_SINK, PROVENANCE_HEADER
from dr_stream.core.policy import TopicRenamer
from dr_stream.kafka import spark_options
from dr_stream.runtime.provenance_columns import HEADERS_TYPE
from tests.kafka_tools import consume_all, create_topic, end_offsets, unique

pytestmark = pytest.mark.integration

KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
    StructField("partition", IntegerType()), StructField("offset", LongType()),
    StructField("timestamp", TimestampType()), StructField("timestampType", IntegerType()),
    StructField("headers", HEADERS_TYPE),
])
# The copy keeps the millisecond (floored), as Kafka's timestamp does; Spark reads the naive time
# as the machine's.
TS = dt.datetime(2026, 11, 26, 12, 0, 0, 123456)
TS_MS = int(TS.timestamp()) * 1000 + 123


def rows(spark, topic: str, *records: tuple):
    """(key, value, partition, offset, headers) -> rows as Spark's Kafka source gives them."""
    return spark.createDataFrame([(k, v, topic, p, o, TS, 0, h) for k, v, p, o, h in records], KAFKA_SCHEMA)


def write(frame, bootstrap: str, **kwargs) -> None:
    kwargs.setdefault("renamer", TopicRenamer())
    frame.write.format(COPY_SINK).mode("append").options(
        **spark_options.sink(ClusterConfig("dc2", bootstrap), **kwargs)).save()


def test_a_copy_keeps_key_value_headers_timestamp_and_partition_and_gains_this_hops_provenance_last(spark, dc2):
    topic = unique("sink-")
    create_topic(dc2.bootstrap, f"dc1.{topic}", partitions=3)
    write(rows(spark, topic, (b"k1", b"v1", 2, 40, [["app", b"1"], ["trace", None]]), (b"k2", None, 1, 41, None)),
          dc2.bootstrap, renamer=TopicRenamer("dc1.${topic}"), provenance_cluster="SRC-id")
    copies = sorted(consume_all(dc2.bootstrap, f"dc1.{topic}"), key=lambda r: r.key or b"")
    assert [(r.key, r.value, r.partition, r.timestamp) for r in copies] == [
        (b"k1", b"v1", 2, TS_MS), (b"k2", None, 1, TS_MS)], "a tombstone stays a tombstone"
    assert [k for k, _ in copies[0].headers] == ["app", "trace", PROVENANCE_HEADER]
    assert copies[0].headers[:2] == (("app", b"1"), ("trace", None))
    entry = json.loads(copies[0].headers[2][1])
    assert {k: entry[k] for k in ("cluster", "topic", "partition", "offset")} == {
        "cluster": "SRC-id", "topic": topic, "partition": 2, "offset": 40}
    assert [k for k, _ in copies[1].headers] == [PROVENANCE_HEADER]


def test_without_provenance_nothing_is_added_and_without_preserved_partitions_the_key_places_the_copy(spark, dc2):
    topic = unique("sink-")
    create_topic(dc2.bootstrap, topic, partitions=3)
    write(rows(spark, topic, *[(b"same-key", f"v{i}".encode(), i % 3, i, [["app", b"x"]]) for i in range(6)]),
          dc2.bootstrap, preserve_partitions=False)
    copies = consume_all(dc2.bootstrap, topic)
    assert len(copies) == 6
    assert len({r.partition for r in copies}) == 1, "one key, one partition, whatever the source's"
    assert all(r.headers == (("app", b"x"),) for r in copies)


def test_the_runs_of_acknowledged_copies_go_to_the_runs_topic_when_the_task_ends(spark, dc2):
    topic, runs = unique("sink-"), unique("__dr_stream_runs.sink-")
    create_topic(dc2.bootstrap, topic, partitions=1)
    create_topic(dc2.bootstrap, runs, partitions=1)
    write(rows(spark, topic, *[(b"k", b"v", 0, 500 + i, None) for i in range(5)]).coalesce(1), dc2.bootstrap,
          runs_topic=runs, provenance_cluster="SRC-id")
    reported = [json.loads(r.value) for r in consume_all(dc2.bootstrap, runs)]
    assert [(r["origin_cluster"], r["origin_topic"], r["origin_start"], r["origin_end"], r["dest_topic"],
             r["dest_start"], r["dest_end"], r["first_timestamp"]) for r in reported][-1] == (
        "SRC-id", topic, 500, 504, topic, 0, 4, TS_MS)


def test_a_record_the_destination_refuses_fails_the_write_naming_its_origin(spark, dc2):
    topic = unique("sink-")
    create_topic(dc2.bootstrap, topic, partitions=1, config={"max.message.bytes": "1000"})
    with pytest.raises(Py4JJavaError) as failed:
        write(rows(spark, topic, (b"k", bytes(5000), 0, 77, None)), dc2.bootstrap, provenance_cluster="SRC-id")
    said = str(failed.value)  # the JVM's whole trace: the task's error and what is attached to it
    assert "dr-stream refused record " in said
    assert f'"topic":"{topic}","partition":0,"offset":77' in said
    assert end_offsets(dc2.bootstrap, topic) == {0: (0, 0)}


@pytest.mark.parametrize(("drop", "option", "said"), [
    ("offset", {}, "no column offset"),
    (None, {"kafka.key.serializer": "org.apache.kafka.common.serialization.StringSerializer"},
     "kafka.key.serializer cannot be set"),
])
def test_rows_or_options_the_sink_cannot_take_are_refused_in_one_line(spark, dc2, drop, option, said):
    frame = rows(spark, "t", (b"k", b"v", 0, 1, None))
    if drop:
        frame = frame.drop(drop)
    options = {**spark_options.sink(ClusterConfig("dc2", dc2.bootstrap), TopicRenamer()), **option}
    with pytest.raises(Exception, match=said):
        frame.write.format(COPY_SINK).mode("append").options(**options).save()
