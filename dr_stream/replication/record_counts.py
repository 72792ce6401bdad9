"""What the replicate query's rules keep from the destination, counted as they decide.

The record path's functions (jvm/ `io.drstream.spark.RecordCounts`) count each record that came
from the destination, whose provenance header is no entry, that a restart found already copied
or that an operator left out at failback, that claimed to come from the destination with no run
on the source to confirm it (copied; also by source topic), and that was taken as come back
unchecked because the source's runs could not be read, in Spark accumulators of the running
query. The
progress of each batch takes what was counted since the last one (`taken`). Spark's observed
metrics did this before: they ship their expressions with every task and generate their code
anew in each, a sixth of the JVM's CPU at five batches a second.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from dr_stream.runtime.jvm_classes import jvm_class

# By the Java side's indexes: RecordCounts.CAME_BACK, MALFORMED, ALREADY_COPIED, LEFT_OUT,
# UNCONFIRMED, UNCHECKED.
REASONS = ("came_from_destination", "malformed_provenance", "already_copied", "left_out", "unconfirmed_cycle",
           "came_from_destination_unchecked")
# Counted, yet copied: not a reason a record was skipped.
COPIED_ALL_THE_SAME = ("malformed_provenance", "unconfirmed_cycle")


@dataclass(frozen=True)
class RecordCounts:
    """One query's counts; `jvm` is the Java object the record path's functions take."""

    jvm: Any

    @staticmethod
    def register(spark: SparkSession, query: str) -> RecordCounts:
        context = spark.sparkContext
        return RecordCounts(jvm_class(context, "io.drstream.spark.RecordCounts")(context._jsc.sc(), query))

    def taken(self) -> dict[str, int]:
        """What was counted since the last call, by reason."""
        return dict(zip(REASONS, (int(n) for n in self.jvm.taken()), strict=True))

    def unconfirmed_taken(self) -> dict[tuple[str, int], int]:
        """The unconfirmed cycle claims counted since the last call, by source partition."""
        names, counts = self.jvm.unconfirmedTaken()
        taken = {}
        for name, n in zip(names, counts, strict=True):
            topic, partition = str(name).rsplit(":", 1)
            taken[(topic, int(partition))] = int(n)
        return taken
