"""The provenance header as Spark columns, evaluated in the JVM (no Python UDF).

The record path reads the record's own headers with dr-stream's Java rule
(`io.drstream.spark.CycleRule`, `cycle_flags`); dr-stream's sink (jvm/ CopySink) writes each hop's
value from the source record's columns. The batch reads of a failback use the same rule and the
same JVM reader (`cycle_flags`, `provenance_entries`). `core/contracts` states the header's
format; `core/provenance` reads it from single records in the driver.

Invariant: a header value that is not provenance JSON counts as no provenance, in every form,
and never fails a row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.classic.column import Column as JvmColumn
from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

from dr_stream.core.config import FilterOverride
from dr_stream.runtime.jvm_classes import gateway, java_map, jvm_class, jvm_view

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def headers_or_empty(headers: Column) -> Column:
    """Kafka's source gives null, not [], for a record without headers."""
    return F.coalesce(headers, F.array().cast(HEADERS_TYPE))


def has_header(headers: Column, header: str) -> Column:
    """True when any header has the key `header`. The record path guards its provenance rule with
    this test, so a record without provenance (every record of an active-passive flow) costs one
    look at its header keys."""
    return F.array_contains(headers_or_empty(headers)["key"], F.lit(header))


def provenance_entries(header: str) -> Column:
    """The record's provenance entries, oldest hop first (struct cluster, topic, partition,
    offset, timestamp; -1 for a missing time), read by the JVM's reader
    (`io.drstream.spark.ProvenanceEntries`, the one the record path's rule uses); a value that is
    no entry is left out."""
    headers = headers_or_empty(F.col("headers"))
    return JvmColumn(_record_path_columns().provenanceEntries(header, headers["key"]._jc, headers["value"]._jc))


def _record_path_columns() -> Any:
    """dr-stream's Java functions of the record path (jvm/: io.drstream.spark.RecordPathColumns)."""
    return jvm_class(None, "io.drstream.spark.RecordPathColumns")


CYCLE = 1  # io.drstream.spark.CycleRule.CYCLE
UNCONFIRMED = 4  # io.drstream.spark.CycleRule.UNCONFIRMED

# How long a record claimed to come back waits for the run that makes it a copy: the flow that
# copied it publishes its runs every half second and when its task ends, after the copy is
# readable. A partition whose wait ran out waits again only once a newer run of it arrives.
CLAIM_WAIT_MS = 30_000


def written_copies(client_config: Mapping[str, str], wait_ms: int = CLAIM_WAIT_MS) -> Any:
    """The Java `io.drstream.kafka.WrittenCopies.Source` of the source cluster (its Java client
    settings, `spark_options.java_client`): where the record path reads the runs dr-stream flows
    published there (`__dr_stream_runs.*`), to hold a cycle claim to them."""
    return jvm_view().io.drstream.kafka.WrittenCopies.Source(java_map(client_config), wait_ms)


def destination_originals(client_config: Mapping[str, str]) -> Any:
    """The Java `io.drstream.kafka.DestinationOriginals.Source` of the destination (its Java client
    settings): where the record path reads the original a cycle claim names."""
    return jvm_view().io.drstream.kafka.DestinationOriginals.Source(java_map(client_config))


def cycle_flags(header: str, destination_cluster_id: str, destination_topic: Column,
                overrides: Sequence[FilterOverride] = (), forward: bool = True, counts: Any = None,
                confirm: tuple[Any, Any] | None = None) -> Column:
    """`CYCLE | MALFORMED` (2, `io.drstream.spark.CycleRule.MALFORMED`) | `UNCONFIRMED` | UNCHECKED (8)
    of a record, read by dr-stream's Java rule (`io.drstream.spark.CycleRule`) from the record's
    own headers with `destination_topic` (a column of the record), and only for a record with a
    header under the provenance key (0 for the others, every record of an active-passive flow).
    A claim: an entry names the destination's cluster.id and topic and no filter override lets it
    through (an override matches the entry's cluster and topic regexes and its copy time is within
    [from_ms, to_ms], an open end being unbounded); without `forward`, any entry not let through.
    CYCLE: the claim is taken; with `confirm` (`written_copies` of the source,
    `destination_originals` of the destination) only for a record a run on the source holds as the
    copy its newest entry names, or whose original (with its key and value) the
    destination holds where the entry naming it says; else UNCONFIRMED (it is copied), and
    CYCLE | UNCHECKED where neither can check it. MALFORMED: a value under the key is no
    entry (it is still copied). With `counts` (a `RecordCounts`' Java object), the rule counts
    each record it flags."""
    jvm = jvm_view()
    rule_class = jvm.io.drstream.spark.CycleRule
    py4j = gateway()
    clusters = py4j.new_array(jvm.java.lang.String, len(overrides))
    topics = py4j.new_array(jvm.java.lang.String, len(overrides))
    froms = py4j.new_array(jvm.long, len(overrides))
    tos = py4j.new_array(jvm.long, len(overrides))
    for i, override in enumerate(overrides):
        clusters[i], topics[i] = override.cluster, override.topic
        froms[i] = override.from_ms if override.from_ms is not None else -(2**63)
        tos[i] = override.to_ms if override.to_ms is not None else 2**63 - 1
    rule = rule_class(header, destination_cluster_id, rule_class.overrides(clusters, topics, froms, tos), forward)
    if counts is not None:
        rule = rule.counting(counts)
    if confirm is not None:
        rule = rule.confirmedBy(*confirm)
    headers = headers_or_empty(F.col("headers"))
    flags = JvmColumn(_record_path_columns().cycleFlags(rule, headers["key"]._jc, headers["value"]._jc,
                                                       destination_topic._jc, F.col("topic")._jc,
                                                       F.col("partition")._jc, F.col("offset")._jc, F.col("key")._jc,
                                                       F.col("value")._jc))
    return F.when(has_header(F.col("headers"), header), flags).otherwise(F.lit(0))


def counted_drop(counts: Any, left_out: Column) -> Column:
    """True, counting in `counts` (a `RecordCounts`' Java object) a record a restart drops: as left
    out at failback when `left_out`, else as already copied. Nondeterministic, so the generated
    code calls it only where the terms before it in a conjunction are true."""
    return JvmColumn(_record_path_columns().countedDrop(counts, left_out._jc))
