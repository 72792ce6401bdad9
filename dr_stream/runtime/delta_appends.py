"""Small appends to a Delta table without a Spark job: delta-rs writes them from the driver.

A running flow appends a few rows at a time: its translation log every second while groups move,
its offset index every 30 s. Through Spark each append is a job (planning, tasks in the two task
slots the replicate query uses, a Parquet file, a log commit): about a CPU-second in a driver of
two cores, and a stall of the replicate query's next batches. In `make bench`'s steady load those
appends took the micro-batch p99 from 0.57 s to 1.7-2.0 s. delta-rs writes the same Parquet file
and log commit from the driver in milliseconds. Its commit is put-if-absent like Spark's Delta,
so both can write one table (the index's upkeep still rewrites it through Spark).

Where delta-rs cannot write a table (a scheme it has no client for, such as hdfs://, or a table
feature it does not know), that append and the table's later ones go through Spark: said once
per table, and each such append counted (`counted`: the flow's
`dr_stream_delta_appends_through_spark_total`). A commit that lost a race with another writer
(the table's upkeep, `delta_upkeep`) is not such a failure: it is written again on the newer
version, and a commit that keeps losing (upkeep after upkeep) goes through Spark that once, whose
blind append does not conflict with a rewrite, while the table's next appends try delta-rs again.

Rows are tuples in the schema's field order; a timestamp column takes epoch milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

Row = Sequence[Any]


@dataclass
class DeltaAppends:
    """Appends rows to Delta tables, through delta-rs where it can write them, else through Spark."""

    log: Callable[[str], None] = print
    # told the table of each append that went through Spark
    counted: Callable[[str], None] = lambda path: None
    # tables delta-rs could not write, with why: they are appended to through Spark from then on
    fell_back: dict[str, str] = field(default_factory=dict)
    # tables an append of which lost every commit race, said once each
    raced: set[str] = field(default_factory=set)

    def append(self, path: str, schema: StructType, rows: Sequence[Row], through_spark: Callable[[], None],
               merge_schema: bool = False) -> None:
        """Appends `rows` to the table at `path` (created when absent); `through_spark` appends the
        same rows through Spark, for a table delta-rs cannot write. `merge_schema`: columns the
        table lacks are added (a table written by an older version)."""
        if not rows:
            return
        if path not in self.fell_back:
            try:
                _write(path, schema, rows, merge_schema)
                return
            except LostRaces as exc:
                if path not in self.raced:
                    self.raced.add(path)
                    self.log(f"appending to {path}: {exc}; this append goes through Spark (said once per table)")
            except Exception as exc:  # a scheme or a table feature delta-rs does not know
                why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                self.fell_back[path] = why
                self.log(f"appending to {path} through Spark from now on: the deltalake package cannot write it "
                         f"({why})")
        through_spark()
        self.counted(path)


def through_spark(spark: Callable[[], SparkSession] | None, path: str, schema: StructType, rows: Sequence[Row]
                  ) -> None:
    """`rows` appended to the table at `path` by Spark's Delta writer: the `through_spark` of a
    small table's `append` (its few rows built inside the JVM, `local_frame`)."""
    if spark is None:
        raise RuntimeError(f"{path}: written through Spark here; no session given")
    from dr_stream.runtime.local_frame import local_frame

    local_frame(spark(), rows, schema).write.format("delta").mode("append").save(path)


# A commit that lost a race with another writer of the table (the flow's own upkeep rewriting it)
# is written again on the version that won: this many times, a little longer apart each time
# (about 4 s in all, more than an upkeep's rewrite of a table this size takes).
COMMIT_ATTEMPTS = 12


class LostRaces(RuntimeError):
    """Every commit of an append lost to another writer's."""


def _write(path: str, schema: StructType, rows: Sequence[Row], merge_schema: bool) -> None:
    import random
    import time

    from deltalake import write_deltalake
    from deltalake.exceptions import CommitFailedError

    data = arrow_table(schema, rows)
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        try:
            write_deltalake(path, data, mode="append", schema_mode="merge" if merge_schema else None)
            return
        except CommitFailedError as exc:
            if attempt == COMMIT_ATTEMPTS:
                raise LostRaces(f"{COMMIT_ATTEMPTS} commits lost to other writers' "
                                f"({str(exc).splitlines()[0] if str(exc) else 'CommitFailedError'})") from exc
            time.sleep(0.05 * attempt * (0.5 + random.random()))


def arrow_table(schema: StructType, rows: Sequence[Row]) -> Any:
    """`rows` as an Arrow table of `schema`'s columns (arro3, which deltalake ships with)."""
    from arro3.core import Array, DataType, Field, Schema, Table

    arrays, fields = [], []
    for i, column in enumerate(schema.fields):
        values = [row[i] for row in rows]
        kind = column.dataType.typeName()
        if kind == "timestamp":
            # Spark's Delta timestamps are microseconds since the epoch, in UTC.
            micros = [None if v is None else v * 1000 for v in values]
            array = Array(micros, DataType.int64()).cast(DataType.timestamp("us", tz="UTC"))
        elif kind in _PLAIN_TYPES:
            array = Array(values, getattr(DataType, _PLAIN_TYPES[kind])())
        else:
            raise TypeError(f"{column.name}: no Arrow type for Spark's {kind}")
        arrays.append(array)
        fields.append(Field(column.name, array.type, nullable=column.nullable))
    return Table.from_arrays(arrays, schema=Schema(fields))


# Spark type name -> the arro3 DataType constructor of its Arrow type
_PLAIN_TYPES = {"string": "string", "integer": "int32", "long": "int64", "boolean": "bool"}
