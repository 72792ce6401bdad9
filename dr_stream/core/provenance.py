"""The provenance header: where a record was copied from, at every hop.

A record copied from cluster X, topic T, partition P, offset O carries one header
`__replicator_id = {"cluster": X's cluster.id, "topic": T, "partition": P, "offset": O,
"timestamp": ms when copied}`; each hop appends one and keeps the earlier ones. The key is the
one Confluent Replicator uses, so applications that already skip it keep working.

This module is the rule as plain Python, for the driver's few look-ups at single consumed
records (`newest_entry`, `origin_offset`); the record path and the batch reads evaluate the
same rule as Spark columns (`runtime/provenance_columns`).

Invariant: a header value that is not provenance JSON counts as no provenance and never fails
a look-up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dr_stream.core.contracts import provenance_entry

Headers = Sequence[tuple[str, bytes | None]] | None


def entries(headers: Headers, header: str) -> list[dict[str, Any] | None]:
    """Every value under the provenance key of a consumed record, oldest hop first; a value that
    is not an entry (`contracts.provenance_entry`) is None in its place."""
    return [provenance_entry(value) for key, value in headers or () if key == header]


def newest_entry(headers: Headers, header: str) -> dict[str, Any] | None:
    """The newest hop's provenance entry of a consumed record, or None."""
    found = entries(headers, header)
    return found[-1] if found else None


def origin_offset(entry: dict[str, Any] | None, cluster_id: str, topic: str, partition: int) -> int | None:
    """The origin offset an entry names when it names exactly that cluster, topic and partition."""
    if (entry and (entry.get("cluster"), entry.get("topic"), entry.get("partition")) == (cluster_id, topic, partition)
            and isinstance(entry.get("offset"), int)):
        return int(entry["offset"])
    return None
