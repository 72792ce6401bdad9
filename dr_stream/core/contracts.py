"""What other processes rely on: every internal topic, group and header name, and the formats of
the records dr-stream writes for itself. MirrorMaker 2 keeps its names in its replication policy
for the same reason: applications, tools and the JVM side (jvm/) see these bytes, so each is
stated once.

The JVM side writes the runs record (`io.drstream.kafka.CopyRuns`) and the provenance header
(`io.drstream.kafka.ProvenanceWriter`, in the sink `io.drstream.spark.CopySink`), reads the
provenance header (`io.drstream.kafka.ProvenanceEntry`) and takes the sink settings below.
Golden fixtures under tests/contracts/ hold the bytes each side must write and read; the Python
tests and jvm/src/test both read them, so a change on one side alone fails a test.

Invariants: a reader never fails on a record that is not in the format (it answers None and the
caller counts it); a JSON object with a member twice counts its first occurrence, as the JVM's
reader does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# Headers on replicated records.
PROVENANCE_HEADER = "__replicator_id"  # the default of `provenance.header`; Confluent Replicator's key
# Internal topics.
CONSUMER_TIMESTAMPS_TOPIC = "__consumer_timestamps"  # on the source cluster, one per cluster
RUNS_TOPIC_PREFIX = "__dr_stream_runs."  # on the destination, one per flow
LAG_TOPIC_PREFIX = "__dr_stream_lag."  # on the destination, one per flow
ACLS_TOPIC_PREFIX = "__dr_stream_acls."  # on the destination, one per flow: the ACLs the flow created there
# Groups and commit metadata.
LEFT_OUT_GROUP_PREFIX = "dr-stream-left-out."  # on a failback's returning cluster
SYNC_METADATA_PREFIX = "dr-stream:"  # metadata of every offset commit dr-stream makes
# The replicate query's sink (writes each copy, its provenance header, and its runs) and its
# producer's settings (passed with a `kafka.` prefix, as the producer's own).
COPY_SINK = "io.drstream.spark.CopySink"
RUNS_TOPIC_SETTING = "dr.stream.runs.topic"
PROVENANCE_HEADER_SETTING = "dr.stream.provenance.header"
PROVENANCE_CLUSTER_SETTING = "dr.stream.provenance.cluster"
RUNS_HOLD_SETTING = "dr.stream.runs.hold.ms"
# The sink's own options: the destination topic's name around the source's, and whether a copy
# keeps its partition number.
RENAME_PREFIX_SETTING = "dr.stream.rename.prefix"
RENAME_SUFFIX_SETTING = "dr.stream.rename.suffix"
PRESERVE_PARTITIONS_SETTING = "dr.stream.preserve.partitions"

# A position's timestamp when the last record the group read is not known.
UNKNOWN_TIMESTAMP = -1

# The runs record's value members, in the order the JVM writes them; its key is the run's place
# on the destination, {"topic", "partition", "dest_start"}.
RUN_MEMBERS = ("origin_cluster", "origin_topic", "origin_partition", "origin_start", "origin_end", "dest_topic",
               "dest_partition", "dest_start", "dest_end", "first_timestamp", "last_timestamp", "copied_at")
_RUN_REQUIRED = RUN_MEMBERS[:9]


def runs_topic(flow_name: str) -> str:
    return RUNS_TOPIC_PREFIX + flow_name


def lag_topic(flow_name: str) -> str:
    return LAG_TOPIC_PREFIX + flow_name


def acls_topic(flow_name: str) -> str:
    return ACLS_TOPIC_PREFIX + flow_name


# An ACL the flow created on the destination is a record keyed by the ACL itself, these members
# in this order as a JSON array; removing it from the destination writes a tombstone.
ACL_MEMBERS = ("resource_type", "name", "pattern", "principal", "host", "operation", "permission")


def acl_key(members: Mapping[str, str]) -> bytes:
    return json.dumps([members[m] for m in ACL_MEMBERS]).encode()


def read_acl_key(key: bytes | None) -> dict[str, str] | None:
    if key is None:
        return None
    try:
        values = json.loads(key)
    except (TypeError, ValueError):
        return None
    if not isinstance(values, list) or len(values) != len(ACL_MEMBERS) or not all(isinstance(v, str) for v in values):
        return None
    return dict(zip(ACL_MEMBERS, values, strict=True))


def sync_metadata(flow_name: str, origin_cluster_id: str | None) -> str:
    """The metadata of an offset commit a flow makes: `dr-stream:<flow>@<cluster.id>`, naming the
    cluster the position was translated from (a flow name holds no '@'); without one,
    `dr-stream:<flow>`, as every commit before chains."""
    return f"{SYNC_METADATA_PREFIX}{flow_name}" + (f"@{origin_cluster_id}" if origin_cluster_id else "")


def synced_from(metadata: str) -> str | None:
    """The cluster.id a dr-stream commit was translated from; "" when it does not say (an older
    commit, or a command's); None when dr-stream did not make the commit."""
    if not metadata.startswith(SYNC_METADATA_PREFIX):
        return None
    _, _, origin = metadata[len(SYNC_METADATA_PREFIX):].partition("@")
    return origin


def left_out_group(destination_cluster_id: str) -> str:
    """The group, on a flow's source, whose offsets mark records that flow must not copy."""
    return LEFT_OUT_GROUP_PREFIX + destination_cluster_id


def _first_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in pairs:
        out.setdefault(name, value)
    return out


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _object(value: bytes | None) -> dict[str, Any] | None:
    # NaN and Infinity are Python's extensions to JSON; the JVM's reader (FlatJson) refuses them too.
    try:
        parsed = json.loads(value or b"", object_pairs_hook=_first_members, parse_constant=_not_json)
    except (ValueError, UnicodeDecodeError, TypeError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def read_run(value: bytes | None) -> dict[str, Any] | None:
    """A runs record's value as its members (missing timestamps None), or None when it is not one:
    a member missing or of the wrong type, or origin and destination ranges of different lengths."""
    v = _object(value)
    if v is None or any(m not in v for m in _RUN_REQUIRED):
        return None
    texts = ("origin_cluster", "origin_topic", "dest_topic")
    if not all(isinstance(v[m], str) for m in texts) or not all(
            _is_int(v[m]) for m in _RUN_REQUIRED if m not in texts):
        return None
    if not all(v.get(m) is None or _is_int(v[m]) for m in RUN_MEMBERS[9:]):
        return None
    if v["origin_end"] - v["origin_start"] != v["dest_end"] - v["dest_start"] or v["dest_end"] < v["dest_start"]:
        return None
    return {m: v.get(m) for m in RUN_MEMBERS}


def position_key(group: str, topic: str, partition: int) -> bytes:
    """A `__consumer_timestamps` record's key: one group's position on one source partition."""
    return json.dumps({"group": group, "topic": topic, "partition": partition}, separators=(",", ":")).encode()


def position_value(offset: int, timestamp: int) -> bytes:
    """Its value: the next offset the group reads and the timestamp of the last record it read
    (UNKNOWN_TIMESTAMP)."""
    return json.dumps({"offset": offset, "timestamp": timestamp}, separators=(",", ":")).encode()


def provenance_entry(value: bytes | None) -> dict[str, Any] | None:
    """One provenance header value as the entry it names, or None. An entry is one JSON object
    whose `cluster` and `topic` are strings and whose `partition` and `offset` are integers; its
    `timestamp` is an integer when present (None when absent or null); other members are ignored."""
    v = _object(value)
    if v is None:
        return None
    cluster, topic, partition, offset = v.get("cluster"), v.get("topic"), v.get("partition"), v.get("offset")
    timestamp = v.get("timestamp")
    if not (isinstance(cluster, str) and isinstance(topic, str) and _is_int(partition) and _is_int(offset)):
        return None
    if timestamp is not None and not _is_int(timestamp):
        return None
    return {"cluster": cluster, "topic": topic, "partition": partition, "offset": offset, "timestamp": timestamp}


def provenance_value(entry: Mapping[str, Any]) -> bytes:
    """The bytes one hop writes: members in this order, no spaces (the record path builds the
    same bytes from Spark columns)."""
    return (f'{{"cluster":{json.dumps(entry["cluster"])},"topic":"{entry["topic"]}","partition":{entry["partition"]},'
            f'"offset":{entry["offset"]},"timestamp":{entry["timestamp"]}}}').encode()
