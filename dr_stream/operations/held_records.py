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

import argparse
import datetime as dt
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dr_stream.core.config import load_flow
from dr_stream.exit_codes import ExitCode
from dr_stream.kafka.cluster_context import FlowClusters
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


def _released(args: argparse.Namespace) -> int:
    from dr_stream.operations.report_commands import spark_for, tables_of

    config = load_flow(args.config)
    release = retry_held if args.retry else skip_held
    tables = tables_of(config)
    with FlowClusters.of(config, tables.spark) as clusters:
        clusters.unreachable()  # each cluster that answers must be the one the state belongs to
    try:
        done = release(tables, args.topic, args.partition, args.offset, lambda: spark_for(config))
    except NotHeld as exc:
        print(f"dr-stream: {args.command}: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if isinstance(done, Loss):
        print(f"LOSS: {done.line()}; recorded in {config.streaming.losses}. The flow goes on from offset "
              f"{done.first_offset + 1} within seconds (at its next start if it is stopped)")
    else:
        print(f"{done.topic}[{done.partition}]: the record at offset {done.offset} is tried again within seconds (at "
              "the flow's next start if it is stopped); if the destination refuses it again, the partition is held "
              "again")
    return ExitCode.OK


def add_held_record_commands(sub: argparse._SubParsersAction[Any]) -> None:
    for name, retry, what in (
            ("skip", False, "let a partition held at a record the destination refused go on past it; the record "
                            "is recorded as a refused loss"),
            ("retry", True, "copy the record a partition is held at again, once the destination was changed to "
                            "take it")):
        command = sub.add_parser(name, help=what)
        command.add_argument("--config", required=True, help="the flow's YAML file")
        command.add_argument("--topic", required=True, help="the source topic")
        command.add_argument("--partition", required=True, type=int, help="the source partition")
        command.add_argument("--offset", required=True, type=int, help="the offset the partition is held at")
        command.set_defaults(func=_released, retry=retry, command=name)
