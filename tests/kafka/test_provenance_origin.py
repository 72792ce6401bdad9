"""The run interceptor's reading of a provenance value (jvm/ ProvenanceOrigin), in the Spark JVM
that holds dr-stream's jar: the record path's own layout read in place, any other JSON through
the general reading, both to the same origin."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture
def read(spark):
    jvm = spark._jvm
    origins = jvm.io.drstream.kafka.ProvenanceOrigin()

    def read(value: str | None) -> str | None:
        found = origins.read(None if value is None else bytearray(value.encode()), 7)
        return None if found is None else jvm.java.lang.String.valueOf(found)

    return read


def origin(cluster: str, topic: str, partition: int, offset: int) -> str:
    return f"Origin[cluster={cluster}, topic={topic}, partition={partition}, offset={offset}, timestamp=7]"


def test_the_record_paths_own_layout_is_read_and_repeated_names_stay_right(read):
    own = '{{"cluster":"Zx-9_q","topic":"{}","partition":{},"offset":{},"timestamp":1764028800000}}'
    assert read(own.format("dc1.orders", 3, 123456789012345)) == origin("Zx-9_q", "dc1.orders", 3, 123456789012345)
    assert read(own.format("dc1.orders", 4, 0)) == origin("Zx-9_q", "dc1.orders", 4, 0)
    assert read(own.format("payments", 0, 9)) == origin("Zx-9_q", "payments", 0, 9)
    assert read(own.format("dc1.orders", 3, 10)) == origin("Zx-9_q", "dc1.orders", 3, 10)


@pytest.mark.parametrize("value", [
    '{"cluster": "C", "topic": "t", "partition": 3, "offset": 5, "timestamp": 1}',  # spaces
    '{"offset":5,"partition":3,"topic":"t","cluster":"C"}',  # another order, no timestamp
    '{"cluster":"C","topic":"t","partition":3,"offset":5}',  # ends after the offset
])
def test_any_other_layout_of_the_same_object_gives_the_same_origin(read, value):
    assert read(value) == origin("C", "t", 3, 5)


@pytest.mark.parametrize("value", [
    None, "", "{not json", '{"cluster":"C","topic":"t","partition":3}',
    '{"cluster":"C","topic":"t","partition":"x","offset":5}',
    '{"cluster":"C","topic":"t","partition":99999999999,"offset":5}',
])
def test_a_value_without_the_four_fields_gives_no_origin(read, value):
    assert read(value) is None
