"""The provenance header as Spark columns, evaluated in the JVM (no Python UDF).

The record path builds each hop's value from strings (`provenance_value`) and reads the
record's own headers with dr-stream's Java rule (`io.drstream.spark.CycleRule`, `cycle_flags`),
so the whole path compiles into one stage of generated code; the batch reads of the
destination (index rebuild, failback) parse it with `from_json` (`with_provenance`,
`is_cycle`). `core/provenance` states the header's format and reads it from single records.

Invariant: a header value that is not provenance JSON counts as no provenance, in every form,
and never fails a row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pyspark import SparkContext
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.classic.column import Column as JvmColumn
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from dr_stream.core.config import FilterOverride
from dr_stream.runtime.step import Step

PROVENANCE_SCHEMA = StructType([
    StructField("cluster", StringType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", LongType()),
])
HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))

PROVENANCE = "_provenance"
MALFORMED = "_malformed_provenance"


def _is_provenance(entry: Column) -> Column:
    return (
        entry.isNotNull()
        & entry["cluster"].isNotNull()
        & entry["topic"].isNotNull()
        & entry["partition"].isNotNull()
        & entry["offset"].isNotNull()
    )


def headers_or_empty(headers: Column) -> Column:
    """Kafka's source gives null, not [], for a record without headers."""
    return F.coalesce(headers, F.array().cast(HEADERS_TYPE))


def _no_entries() -> Column:
    return F.array().cast(ArrayType(PROVENANCE_SCHEMA))


def has_header(headers: Column, header: str) -> Column:
    """True when any header has the key `header`. Spark compiles this test into the record
    path's generated code, where the higher-order functions (`filter`, `transform`, `exists`)
    are evaluated one expression at a time, a Scala map built at each array element read: the
    record path guards every one of them with this test, so a record without provenance (every
    record of an active-passive flow) never reaches them."""
    return F.array_contains(headers_or_empty(headers)["key"], F.lit(header))


def _parsed(header: str) -> Column:
    """Every value under the provenance key, parsed (a value that is not JSON: null fields).
    Its callers guard it with `has_header`."""
    return F.transform(
        F.filter(headers_or_empty(F.col("headers")), lambda h: h["key"] == F.lit(header)),
        lambda h: F.from_json(h["value"].cast("string"), PROVENANCE_SCHEMA, {"mode": "PERMISSIVE"}),
    )


def provenance_entries(header: str) -> Column:
    """The record's valid provenance entries, oldest hop first, read from its headers."""
    return F.when(has_header(F.col("headers"), header), F.filter(_parsed(header), _is_provenance)
                  ).otherwise(_no_entries())


def malformed_provenance(header: str) -> Column:
    """True when a header under the provenance key did not parse as a provenance entry."""
    return F.when(has_header(F.col("headers"), header),
                  F.exists(_parsed(header), lambda e: ~_is_provenance(e))).otherwise(F.lit(False))


def with_provenance(header: str) -> Step:
    """Adds `_provenance` (`provenance_entries`) and `_malformed_provenance` (`malformed_provenance`)."""

    def step(df: DataFrame) -> DataFrame:
        return df.withColumn(PROVENANCE, provenance_entries(header)).withColumn(MALFORMED, malformed_provenance(header))

    return step


def _override_allows(entry: Column, override: FilterOverride) -> Column:
    allowed = entry["cluster"].rlike(f"^(?:{override.cluster})$") & entry["topic"].rlike(f"^(?:{override.topic})$")
    if override.from_ms is not None:
        allowed = allowed & (F.coalesce(entry["timestamp"], F.lit(-1)) >= F.lit(override.from_ms))
    if override.to_ms is not None:
        allowed = allowed & (F.coalesce(entry["timestamp"], F.lit(-1)) <= F.lit(override.to_ms))
    return allowed


def is_cycle(destination_cluster_id: str, destination_topic: Column,
             overrides: Sequence[FilterOverride] = (), entries: Column | None = None) -> Column:
    """True when the record already passed through the destination topic: a provenance entry
    names the destination's cluster.id and topic, and no filter override lets it through (an
    override matches the entry's cluster and topic regexes and its timestamp is within
    [from_ms, to_ms], an open end being unbounded)."""

    def came_from_destination(entry: Column) -> Column:
        hit = (entry["cluster"] == F.lit(destination_cluster_id)) & (entry["topic"] == destination_topic)
        for override in overrides:
            hit = hit & ~_override_allows(entry, override)
        return hit

    # `exists` only where there is an entry: see `has_header`.
    entries = F.col(PROVENANCE) if entries is None else entries
    return F.when(F.size(entries) > 0, F.exists(entries, came_from_destination)).otherwise(F.lit(False))


def _record_path_columns():
    """dr-stream's Java functions of the record path (jvm/: io.drstream.spark.RecordPathColumns)."""
    return SparkContext._active_spark_context._jvm.io.drstream.spark.RecordPathColumns


def copy_time_ms() -> Column:
    """The time of the copy, epoch milliseconds as text, read as each record is copied.

    Not `current_timestamp()`: a streaming query turns that into the batch's time as a constant
    written into the generated code, so Spark compiled the record path anew for every
    micro-batch (two classes a batch; Janino compiling was 6% of the JVM's samples at 5,000
    records/s, most of it this). Not `reflect(...)` either: Spark evaluates it outside generated
    code, which kept the whole projection out of the stage. A Java function that reads the clock,
    marked nondeterministic so it is never folded into a constant."""
    return JvmColumn(_record_path_columns().copyTime()).cast("string")


CYCLE = 1  # io.drstream.spark.CycleRule.CYCLE
MALFORMED_BITS = 2  # io.drstream.spark.CycleRule.MALFORMED


def cycle_flags(header: str, destination_cluster_id: str, destination_topic: Column,
                overrides: Sequence[FilterOverride] = ()) -> Column:
    """`CYCLE | MALFORMED_BITS` of a record: the rule of `is_cycle` and `malformed_provenance`,
    read by dr-stream's Java rule (`io.drstream.spark.CycleRule`) from the record's own headers
    with `destination_topic` (a column of the record), and only for a record with a header under
    the provenance key (0 for the others, every record of an active-passive flow)."""
    jvm = SparkContext._active_spark_context._jvm
    rule_class = jvm.io.drstream.spark.CycleRule
    gateway = SparkContext._active_spark_context._gateway
    clusters = gateway.new_array(jvm.java.lang.String, len(overrides))
    topics = gateway.new_array(jvm.java.lang.String, len(overrides))
    froms = gateway.new_array(jvm.long, len(overrides))
    tos = gateway.new_array(jvm.long, len(overrides))
    for i, override in enumerate(overrides):
        clusters[i], topics[i] = override.cluster, override.topic
        froms[i] = override.from_ms if override.from_ms is not None else -(2**63)
        tos[i] = override.to_ms if override.to_ms is not None else 2**63 - 1
    rule = rule_class(header, destination_cluster_id, rule_class.overrides(clusters, topics, froms, tos))
    headers = headers_or_empty(F.col("headers"))
    flags = JvmColumn(_record_path_columns().cycleFlags(rule, headers["key"]._jc, headers["value"]._jc,
                                                       destination_topic._jc))
    return F.when(has_header(F.col("headers"), header), flags).otherwise(F.lit(0))


def provenance_value(source_cluster_id: str) -> Column:
    """This hop's header value, built from the source record's own columns: the JSON that
    `to_json` of the struct would give, byte for byte, put together from strings. A topic name
    needs no escaping (Kafka allows only ASCII letters, digits, '.', '_' and '-'), the cluster id
    is escaped once here, so a record costs three number-to-text conversions and one
    concatenation, where `to_json` ran a JSON generator per record."""
    return F.concat(
        F.lit('{"cluster":' + json.dumps(source_cluster_id) + ',"topic":"'),
        F.col("topic"),
        F.lit('","partition":'),
        F.col("partition").cast("string"),
        F.lit(',"offset":'),
        F.col("offset").cast("string"),
        F.lit(',"timestamp":'),
        copy_time_ms(),
        F.lit("}"),
    ).cast("binary")


def append_headers(headers: Column, added: Sequence[tuple[str, Column]]) -> Column:
    """`headers` (null as none) followed by `added`, in order: one new array per record."""
    return F.concat(
        headers_or_empty(headers),
        F.array(*(F.struct(F.lit(key).alias("key"), value.alias("value")) for key, value in added)),
    )
