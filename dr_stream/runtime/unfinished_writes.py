"""Files a killed run left half-written in a query's checkpoint, removed before the query starts.

Spark writes each entry of a checkpoint's offset and commit logs to a hidden temporary file
(`.0.<uuid>.tmp`, with its checksum `..0.<uuid>.tmp.crc`) and renames it into place when the
write is complete. A process killed between the two leaves the temporary file behind. Spark
ignores such files when it reads a log, except in one check: a query that has no batch in its
offset log yet starts as new, and refuses to if its `offsets/` or `commits/` directory holds any
file at all (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY). A kill -9 during the first batch of a
real-time query leaves exactly that, and every restart would then fail the same way.

Rule (`unfinished`, pure): only while neither log holds a finished entry (a file named by its
batch number), the hidden temporary files of both logs are unfinished writes and may go: no
batch ever completed, so there is nothing they could belong to. A checkpoint with any finished
entry is left as it is. (A replicate query's resume marks still skip every record already copied; a
translate query reads its topic again from the first record.)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from dr_stream.runtime.jvm_classes import jvm_view
from dr_stream.runtime.state_paths import qualified

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOGS = ("offsets", "commits")
_TEMPORARY = re.compile(r"^\.\.?[^/]*\.tmp(\.crc)?$")


def unfinished(listing: dict[str, list[str]]) -> list[str]:
    """{log directory: the file names in it} -> the `dir/name`s that are unfinished writes."""
    if any(name.isdigit() for log in LOGS for name in listing.get(log, [])):
        return []
    return [f"{log}/{name}" for log in LOGS for name in sorted(listing.get(log, [])) if _TEMPORARY.match(name)]


def drop_unfinished_writes(spark: SparkSession, checkpoint: str) -> list[str]:
    """Removes the unfinished writes of the checkpoint at URI `checkpoint`; returns what it removed."""
    jvm = jvm_view(spark.sparkContext)
    root, fs = qualified(spark, checkpoint)
    listing: dict[str, list[str]] = {}
    for log in LOGS:
        directory = jvm.org.apache.hadoop.fs.Path(root, log)
        if fs.exists(directory):
            listing[log] = [status.getPath().getName() for status in fs.listStatus(directory)]
    dropped = unfinished(listing)
    for name in dropped:
        fs.delete(jvm.org.apache.hadoop.fs.Path(root, name), False)
    return dropped
