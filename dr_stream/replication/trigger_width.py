"""The micro-batch trigger, widened when a batch's fixed cost, not its records, sets the pace.

A micro-batch pays a fixed part for every source partition it reads, whatever that partition
brings: a consumer borrowed from Spark's pool, a reader with its row projections, a produce
request per destination partition. On this project's bench that is about 5 CPU-ms a partition,
what copying some hundred records costs. A trickle spread over hundreds of partitions therefore
makes every batch cost about the same however few records it carries; once a batch takes longer
than the trigger, Spark starts the next one at once, and the flow spends every core it has on
that fixed part. A wider trigger lets each batch carry more records for the same cost.

The rule, per completed batch of the replicate query:
* a batch *strains* when it took longer than the trigger, read fewer than `few_per_partition`
  records per partition it read, and did not reach the per-batch record cap (a backlog: it is
  the records that cost there, and a backlog runs batches back to back whatever the trigger);
* after `streak` straining batches in a row, the trigger at least doubles, and becomes at least
  their median duration rounded up to a whole second, never past `ceiling_ms`. Not more: batches
  that run back to back also compete with the driver's work for each batch (the index feed's
  append, the lag sample), so they take longer than the same batches spaced out; a trigger of
  twice their duration overshot to 11 s on the bench where 4-6 s was enough. If batches still
  strain, the rule widens again;
* a batch that does not strain resets the count, and so does a trigger that found nothing new
  (batches are not back to back then); the first batch after a (re)start does not count at all
  (it carries the start's own costs).

Invariants: the trigger only widens, never beyond `ceiling_ms` (a trigger configured at or
above the ceiling never changes); each widening, and reaching the ceiling, is returned once, for
the flow to say so and to restart its query between batches with the new trigger. Pure: the
flow tells it each batch and acts on what it returns.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field


@dataclass(frozen=True)
class BatchCost:
    wall_ms: int  # Spark's triggerExecution
    records: int
    partitions_read: int  # source partitions with at least one record in the batch

    @property
    def per_partition(self) -> float:
        return self.records / max(1, self.partitions_read)


@dataclass(frozen=True)
class Widening:
    from_ms: int
    to_ms: int  # == from_ms: the ceiling stops it
    median_wall_ms: int
    median_records: int
    median_partitions: int

    @property
    def widened(self) -> bool:
        return self.to_ms > self.from_ms

    def shown(self, ceiling_key: str = "streaming.max_trigger") -> str:
        why = (f"the last batches each took longer than the trigger (median {self.median_wall_ms / 1000:.1f} s) and "
               f"carried about {self.median_records / max(1, self.median_partitions):.0f} records per partition "
               f"read ({self.median_records} over {self.median_partitions}): a batch's cost per partition, not its "
               "records, sets the pace")
        if not self.widened:
            return (f"trigger stays at {seconds(self.to_ms)}, its ceiling ({ceiling_key}): {why}; batches run back "
                    "to back, so the flow needs more cores or fewer partitions per flow to go faster")
        return (f"trigger {seconds(self.from_ms)} -> {seconds(self.to_ms)}: {why}, so each batch now carries more of "
                f"them (up to {ceiling_key}); the replicate query restarts between batches to take it")


def seconds(ms: int) -> str:
    """'500ms', '2s', '1.5s'."""
    return f"{ms}ms" if ms < 1000 else f"{ms / 1000:g}s"


@dataclass
class TriggerWidth:
    trigger_ms: int
    ceiling_ms: int
    batch_cap: int  # records a batch reads at most (maxOffsetsPerTrigger)
    few_per_partition: int = 100
    streak: int = 5
    _straining: list[BatchCost] = field(default_factory=list)
    _skip_next: bool = True
    _at_ceiling_said: bool = False

    def restarted(self) -> None:
        """The query (re)started: its first batch carries the start's own costs."""
        self._skip_next, self._straining = True, []

    def batch_done(self, batch: BatchCost) -> Widening | None:
        """Tells the rule a completed batch; returns a widening (or the ceiling) the flow should
        act on and say, once."""
        if batch.partitions_read == 0:  # a trigger that found nothing new
            self._straining = []
            return None
        if self._skip_next:
            self._skip_next = False
            return None
        if not self._strains(batch):
            self._straining = []
            return None
        self._straining.append(batch)
        if len(self._straining) < self.streak:
            return None
        seen, self._straining = self._straining, []
        wall = int(statistics.median(b.wall_ms for b in seen))
        wider = min(self.ceiling_ms, max(2 * self.trigger_ms, 1000 * math.ceil(wall / 1000)))
        if wider <= self.trigger_ms:
            if self._at_ceiling_said:
                return None
            self._at_ceiling_said = True
        widening = Widening(self.trigger_ms, max(wider, self.trigger_ms), wall,
                            int(statistics.median(b.records for b in seen)),
                            int(statistics.median(b.partitions_read for b in seen)))
        self.trigger_ms = widening.to_ms
        return widening

    def _strains(self, batch: BatchCost) -> bool:
        return (batch.wall_ms > self.trigger_ms and batch.records < self.batch_cap
                and batch.per_partition < self.few_per_partition)

    @property
    def interval(self) -> str:
        """The trigger as Spark's processingTime string."""
        return f"{self.trigger_ms} milliseconds"
