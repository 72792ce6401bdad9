"""Destination partitions the offset index holds runs of that the destination no longer has.

A topic deleted on the destination takes its records with it, so the runs of its copies place
nothing any more; and if a topic of that name comes back (the topic sync makes it again while
the source still has it), its offsets start over, where the old runs would place positions
wrongly. Such partitions leave the driver's store, its per-partition maps and the table: what
the index keeps follows the topics that exist, not every topic the flow ever copied.

A partition counts as gone only when two looks in a row, an upkeep apart, miss it, and only on
a listing that holds the flow's own runs topic: a listing without it is not whole (a broker
still loading its metadata), and nothing is dropped on its word.
"""

from __future__ import annotations

from collections.abc import Mapping, Set

Partition = tuple[str, int]

# a log start no record reaches: the table's rewrite drops every row of a gone partition
GONE = 2**62


def gone_partitions(held: Set[Partition], listed: Mapping[str, int], own_topic: str,
                    missed_before: Set[Partition]) -> tuple[set[Partition], set[Partition]]:
    """`held`: the destination partitions the store has runs of; `listed`: every destination
    topic and its partition count -> (the partitions gone now, those this look missed)."""
    if own_topic not in listed:
        return set(), set(missed_before)
    missed = {(topic, partition) for topic, partition in held if partition >= listed.get(topic, 0)}
    return missed & set(missed_before), missed
