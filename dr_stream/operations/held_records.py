"""`dr-stream skip` and `dr-stream retry`: what an operator does about a partition held at a
record the destination refused.

The record stays on the source; the destination will not take it as it is. Either the operator
changes the destination so it does (a larger `max.message.bytes`, another cleanup policy, a
grant) and asks for the record again (`retry`), or chooses to do without it there (`skip`).
A skip is a loss, and is recorded as one (cause `refused`, one record) in the flow's ledger:
`losses` lists it and `drill` fails on it. Either way the running flow sees it within seconds
(at its next start if it is stopped) and reads the partition on from the record after a skipped
one or from a retried one, so nothing held back behind it is lost or copied twice. A retried
record refused again holds its partition again.

Invariant: only the record a partition is held at can be skipped or retried; any other offset
is refused with the holds there are; a cluster that answers as another cluster than the one
the state belongs to refuses the command (`recorded_clusters`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING

from dr_stream.operations.flow_tables import FlowTables
from dr_stream.replication.holds import RETRY, Hold, refused_loss
from dr_stream.replication.losses import Loss

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class NotHeld(ValueError):
    """The partition is not held at that offset."""


def held_at(tables: FlowTables, topic: str, partition: int, offset: int) -> Hold:
    """The hold of `topic[partition]` at `offset`; NotHeld names the holds there are otherwise."""
    held = tables.holding().held
    hold = held.get((topic, partition))
    if hold is None or hold.offset != offset:
        now = ", ".join(f"{h.topic}[{h.partition}] at offset {h.offset}" for _, h in sorted(held.items()))
        raise NotHeld(f"{topic}[{partition}] is not held at offset {offset}; held now: {now or 'nothing'}")
    return hold


def skip_held(tables: FlowTables, topic: str, partition: int, offset: int,
              spark_of: Callable[[], SparkSession]) -> Loss:
    """Records the record `topic[partition]` is held at, `offset`, as a refused loss."""
    loss = refused_loss(held_at(tables, topic, partition, offset), dt.datetime.now(dt.UTC))
    tables.losses.append(spark_of(), [loss])
    return loss


def retry_held(tables: FlowTables, topic: str, partition: int, offset: int,
               spark_of: Callable[[], SparkSession]) -> Hold:
    """Asks the flow to copy the record `topic[partition]` is held at, `offset`, again."""
    hold = held_at(tables, topic, partition, offset)
    retry = Hold(hold.topic, hold.partition, hold.offset, hold.size, hold.reason, dt.datetime.now(dt.UTC), RETRY)
    tables.holds.append(spark_of(), [retry])
    return retry
