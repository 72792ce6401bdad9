"""The replication policy's rules as Spark columns, for the record path and the index rebuild."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from dr_stream.core.policy import TopicRenamer


def remote_topic(renamer: TopicRenamer, topic: Column) -> Column:
    """The destination topic of a source topic column (`TopicRenamer.format_remote_topic`)."""
    if renamer.is_identity():
        return topic
    prefix, suffix = renamer.affixes
    return F.concat(F.lit(prefix), topic, F.lit(suffix))
