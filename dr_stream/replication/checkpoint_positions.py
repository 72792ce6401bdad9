"""Where a replicate query's source stands, as its checkpoint says: the next offset it reads of
each source partition.

Spark writes, for each batch N, `offsets/N` (the end of the range it reads of each source
partition, which is the next offset to read once the batch is done) and, once the batch's
output is written, `commits/N`. A restarted query goes on from the newest committed batch's
offsets (a batch planned but not committed runs again from the same start). Those are what the
flow compares with the source's log start to find what retention deleted before it was read.

`offset_log_positions` is the rule for one offset file (pure); `next_to_read` reads the
checkpoint through Hadoop's FileSystem, so it works on any state URI.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from dr_stream.core.offset_log import Partition, newest_batch, parse
from dr_stream.runtime.state_paths import qualified, read_text

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


EARLIEST, LATEST = -2, -1  # Spark's specific-offsets markers for a partition's first record and its end


def specific_offsets(topics: Mapping[str, int], positions: Mapping[Partition, int], default: int) -> str:
    """A new checkpoint's startingOffsets in Spark's specific-offsets shape: every partition of
    `topics` (topic -> partitions) named, as Spark asks, at its position or else at `default`."""
    return json.dumps({t: {str(p): positions.get((t, p), default) for p in range(n)}
                       for t, n in sorted(topics.items())}, sort_keys=True)


def offset_log_positions(text: str) -> dict[Partition, int]:
    """One `offsets/N` file -> per source partition, its end offset (`offset_log`); a negative
    offset (Spark's "earliest" or "latest" marker) says nothing exact."""
    out: dict[Partition, int] = {}
    for offsets in parse(text, "offset log").kafka_sources.values():
        out.update({tp: o for tp, o in offsets.items() if o >= 0})
    return out


def next_to_read(spark: SparkSession, checkpoint: str) -> dict[Partition, int]:
    """Per source partition, the offset the query reads next when it starts from `checkpoint`;
    empty when no batch was committed there yet (the query then starts at `starting_offsets`)."""
    commits, fs = qualified(spark, f"{checkpoint.rstrip('/')}/commits")
    if not fs.exists(commits):
        return {}
    batch = newest_batch([status.getPath().getName() for status in fs.listStatus(commits)])
    if batch is None:
        return {}
    text = read_text(spark, f"{checkpoint.rstrip('/')}/offsets/{batch}")
    return offset_log_positions(text) if text is not None else {}
