"""The sink interceptor's stamp (jvm/ CopyInterceptor), in the Spark JVM that holds dr-stream's
jar: the record path's stamp gives the record its timestamp and leaves its headers, and a record
without a readable stamp keeps the producer's own time."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from dr_stream.core.contracts import TIMESTAMP_HEADER
from dr_stream.runtime.provenance_columns import origin_stamp

pytestmark = pytest.mark.integration


@pytest.fixture
def send(spark):
    """CopyInterceptor.stamped of a record with these headers: (timestamp, header keys left)."""
    jvm = spark._jvm

    def send(headers: list[tuple[str, bytes]]) -> tuple[int | None, list[str]]:
        record = jvm.org.apache.kafka.clients.producer.ProducerRecord("t", 0, bytearray(b"k"), bytearray(b"v"))
        for key, value in headers:
            record.headers().add(key, bytearray(value))
        sent = jvm.io.drstream.kafka.CopyInterceptor.stamped(record)
        assert (sent.key(), sent.value(), sent.partition()) == (b"k", b"v", 0)
        return sent.timestamp(), [h.key() for h in sent.headers().toArray()]

    return send


def test_the_stamp_becomes_the_timestamp_and_leaves_every_other_header(send):
    stamp = (1_764_028_800_123).to_bytes(8, "big")
    assert send([("app", b"1"), ("__replicator_id", b"{}"), (TIMESTAMP_HEADER, stamp)]) == (
        1_764_028_800_123, ["app", "__replicator_id"])


@pytest.mark.parametrize("value", [b"1764028800123", b"", bytes(7)], ids=["decimal text", "empty", "7 bytes"])
def test_a_stamp_that_is_not_8_bytes_leaves_the_time_to_the_producer(send, value):
    assert send([(TIMESTAMP_HEADER, value)]) == (None, [])


def test_a_record_without_a_stamp_leaves_unchanged(send):
    assert send([("app", b"1")]) == (None, ["app"])


def test_the_record_paths_stamp_reads_back_as_the_source_timestamp_to_the_millisecond(spark, send):
    rows = spark.range(1).select(F.lit("orders").alias("topic"), F.lit(3).alias("partition"),
                                 F.lit(7).cast("long").alias("offset"))
    stamp = rows.select(origin_stamp(F.lit("2026-11-26 12:00:00.123456").cast("timestamp"))).first()[0]
    expected = spark.range(1).select(F.unix_millis(F.lit("2026-11-26 12:00:00.123456").cast("timestamp"))).first()[0]
    assert send([(TIMESTAMP_HEADER, bytes(stamp))])[0] == expected
