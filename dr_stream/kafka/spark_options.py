"""Every option map handed to Spark's Kafka source and sink.

Spark's connector runs Apache Kafka's Java clients, which take the flow's `kafka:` properties
unchanged under a `kafka.` prefix. The maps for the replication and translate queries, the index's
resume scan, the failback batch reads and dr-stream's sink are all built here, from one
`cluster_options`.
"""

from __future__ import annotations

import json

from dr_stream.core.config import ClusterConfig, FlowConfig
from dr_stream.core.contracts import (
    CONSUMER_TIMESTAMPS_TOPIC,
    PRESERVE_PARTITIONS_SETTING,
    PROVENANCE_CLUSTER_SETTING,
    PROVENANCE_HEADER,
    PROVENANCE_HEADER_SETTING,
    RENAME_PREFIX_SETTING,
    RENAME_SUFFIX_SETTING,
    RUNS_TOPIC_SETTING,
)
from dr_stream.core.policy import TopicRenamer


def cluster_options(cluster: ClusterConfig) -> dict[str, str]:
    """How Spark's Java clients reach `cluster`: its bootstrap servers and `kafka:` properties."""
    return {"kafka.bootstrap.servers": cluster.bootstrap_servers,
            **{f"kafka.{k}": v for k, v in cluster.kafka.items()}}


def java_client(cluster: ClusterConfig) -> dict[str, str]:
    """`cluster_options` as Kafka's Java clients take them, without Spark's `kafka.` prefix: for
    dr-stream's own readers inside the record path."""
    return {k.removeprefix("kafka."): v for k, v in cluster_options(cluster).items()}


# A micro-batch reads each partition's range with a consumer of that partition, one partition after
# the other in each task, so what a batch costs grows with the partitions it touches. Two settings
# keep that cost to a few milliseconds each (1,000 partitions, one new record each, local[2]: 260 s
# a batch with the client's and Spark's defaults, 5.4 s with these):
# - the consumer's fetch does not wait on the broker for more data (default 500 ms): only ranges
#   known to hold records are read, so the wait bought nothing but idle time at each range's end.
#   Real-time mode polls its partitions all the time and keeps the default.
# - Spark keeps a consumer per partition between batches (`runtime/session.CONSUMER_CACHE`, a
#   session setting; Spark's default of 64 made every batch over more partitions close and open
#   most of them again).
# A `kafka.fetch.max.wait.ms` in the flow's properties, or the Spark conf on the command line, wins.
_BATCH_FETCH = {"kafka.fetch.max.wait.ms": "0"}


def _reading(cluster: ClusterConfig) -> dict[str, str]:
    return {
        **cluster_options(cluster),
        "includeHeaders": "true",
        # Records of aborted transactions are not data; a replicator must not copy them.
        "kafka.isolation.level": "read_committed",
        # Records deleted by retention before they were read are reported by Spark and skipped:
        # stopping the flow would lose more, and a crash loop helps nobody.
        "failOnDataLoss": "false",
    }


def replicate_source(config: FlowConfig, topics: list[str] | None = None) -> dict[str, str]:
    """The replicate query's source: every partition of `topics`, the source topics the flow has
    already created on the destination, so no record reaches the sink before its topic exists.
    Without any yet, the flow's pattern (the sink's producer then waits for the topic)."""
    options = {
        **({} if config.streaming.realtime else _BATCH_FETCH),
        **_reading(config.source),
        "startingOffsets": config.streaming.starting_offsets,
        # New partitions of the subscribed topics show up at the next metadata refresh.
        "kafka.metadata.max.age.ms": "5000",
        # Spark pools its executors' consumers by group id and partition, and gives each query
        # start a new group id unless one is set. One per flow lets a restarted query (a wider
        # trigger, a new topic, a failure) take the consumers the last one left warm, where a
        # new id built a consumer per partition again and left the old ones pooled beside them.
        # The consumers only assign partitions and never commit, so the group holds nothing.
        "kafka.group.id": f"dr-stream-{config.name}-replicate",
    }
    if topics:
        options["subscribe"] = ",".join(sorted(topics))
    else:
        options["subscribePattern"] = config.topic_filter.subscribe_pattern()
    # Real-time mode reads without a bound: its batches are time slices, not record counts.
    if not config.streaming.realtime:
        options["maxOffsetsPerTrigger"] = str(config.streaming.max_records_per_batch)
    return options


def positions_source(config: FlowConfig) -> dict[str, str]:
    """The translate query's source: every partition of the source's `__consumer_timestamps`,
    from its first record on a first start (the topic is compacted: what is left is every
    group's newest position)."""
    return {
        **_BATCH_FETCH,
        **_reading(config.source),
        "includeHeaders": "false",
        "subscribe": CONSUMER_TIMESTAMPS_TOPIC,
        "startingOffsets": "earliest",
        "kafka.group.id": f"dr-stream-{config.name}-translate",
    }


def batch_source(cluster: ClusterConfig, pattern: str) -> dict[str, str]:
    """A batch read of every record now in the topics matching `pattern`."""
    return {**_BATCH_FETCH, **_reading(cluster), "subscribePattern": pattern, "startingOffsets": "earliest",
            "endingOffsets": "latest"}


def batch_range(cluster: ClusterConfig, starts: dict[str, dict[str, int]],
                ends: dict[str, dict[str, int]]) -> dict[str, str]:
    """A batch read of [start, end) of the given partitions ({topic: {partition: offset}})."""
    assign = {topic: [int(p) for p in partitions] for topic, partitions in starts.items()}
    return {**_BATCH_FETCH, **_reading(cluster), "assign": json.dumps(assign), "startingOffsets": json.dumps(starts),
            "endingOffsets": json.dumps(ends)}


# The sink producer's own settings; a flow's `kafka:` properties win over them.
SINK_PRODUCER = {
    # Ordering per partition, with retries, is what makes the crash-resume filter exact.
    "kafka.acks": "all",
    "kafka.enable.idempotence": "true",
    "kafka.max.in.flight.requests.per.connection": "5",
    "kafka.linger.ms": "5",
    "kafka.batch.size": "262144",
}


# The Java producer's own defaults for the two sizes a large record needs raised.
PRODUCER_MAX_REQUEST_SIZE = 1_048_576
PRODUCER_BUFFER_MEMORY = 33_554_432


def record_size_limits(largest_message_bytes: int) -> dict[str, str]:
    """The sink producer's size settings for topics whose `max.message.bytes` reaches
    `largest_message_bytes`: a request may carry a record that large (`max.request.size`), and
    the producer's buffer holds it (`buffer.memory`). Nothing below the producer's defaults."""
    if largest_message_bytes <= PRODUCER_MAX_REQUEST_SIZE:
        return {}
    return {"kafka.max.request.size": str(largest_message_bytes),
            "kafka.buffer.memory": str(max(PRODUCER_BUFFER_MEMORY, 2 * largest_message_bytes))}


def outgrown(sized_for: int, largest_message_bytes: int) -> bool:
    """Whether a sink sized for `sized_for` (`record_size_limits`) is too small for topics whose
    `max.message.bytes` now reaches `largest_message_bytes`: its producer takes the sizes at start."""
    return largest_message_bytes > max(sized_for, PRODUCER_MAX_REQUEST_SIZE)


def sink(destination: ClusterConfig, renamer: TopicRenamer, preserve_partitions: bool = True,
         runs_topic: str | None = None, header: str = PROVENANCE_HEADER, largest_message_bytes: int = 0,
         provenance_cluster: str | None = None) -> dict[str, str]:
    """dr-stream's sink (jvm/ io.drstream.spark.CopySink, `format(COPY_SINK)`): writes each row of
    Spark's Kafka source as its copy, renamed with `renamer`, to the same partition number with
    `preserve_partitions`, with the source record's timestamp, this hop's provenance header under
    `header` as `provenance_cluster` (the source's cluster.id; None: none) and, with `runs_topic`,
    each run of copies reported there.

    Its producer is ordered and idempotent (`SINK_PRODUCER`) and sized by `largest_message_bytes`,
    the largest `max.message.bytes` among the topics the flow syncs, so a record the source topic
    accepts fits its requests (`record_size_limits`); the destination's `kafka:` properties win
    over both, an `interceptor.classes` of theirs included."""
    prefix, suffix = renamer.affixes
    options = {**SINK_PRODUCER, **record_size_limits(largest_message_bytes), **cluster_options(destination),
               RENAME_PREFIX_SETTING: prefix, RENAME_SUFFIX_SETTING: suffix,
               PRESERVE_PARTITIONS_SETTING: str(preserve_partitions).lower()}
    if runs_topic:
        options[f"kafka.{RUNS_TOPIC_SETTING}"] = runs_topic
    if runs_topic or provenance_cluster is not None:
        options[f"kafka.{PROVENANCE_HEADER_SETTING}"] = header
    if provenance_cluster is not None:
        options[f"kafka.{PROVENANCE_CLUSTER_SETTING}"] = provenance_cluster
    return options
