"""Spark's Kafka options and the librdkafka properties: both from the one cluster config."""

from __future__ import annotations

from dr_stream.core.config import parse_flow
from dr_stream.kafka import spark_options
from dr_stream.kafka.clients import client_properties

FLOW = parse_flow({
    "source": {"alias": "dc1", "bootstrap_servers": "a:1", "kafka": {"client.rack": "r1"}},
    "destination": {"alias": "dc2", "bootstrap_servers": "b:2",
                    "kafka": {"interceptor.classes": "com.example.Audit", "linger.ms": 20}},
    "topics": {"include": ["orders"], "rename": "dc1.${topic}"},
})


def test_client_properties_are_the_bootstrap_and_the_kafka_map():
    assert client_properties(FLOW.source) == {"bootstrap.servers": "a:1", "client.rack": "r1"}


def test_every_kafka_property_reaches_spark_under_the_kafka_prefix():
    assert spark_options.cluster_options(FLOW.source) == {"kafka.bootstrap.servers": "a:1", "kafka.client.rack": "r1"}


def test_the_replicate_source_reads_the_flow_s_topics_committed_only_with_headers():
    options = spark_options.replicate_source(FLOW)
    assert options["subscribePattern"] == FLOW.topic_filter.subscribe_pattern()
    assert (options["kafka.isolation.level"], options["includeHeaders"], options["failOnDataLoss"]) == (
        "read_committed", "true", "false")
    assert options["kafka.bootstrap.servers"] == "a:1"
    # one group id per flow: a restarted query takes the consumers Spark pooled for the last one
    assert options["kafka.group.id"] == f"dr-stream-{FLOW.name}-replicate"


def test_the_sink_is_idempotent_and_the_flow_s_settings_win_its_interceptors_too():
    options = spark_options.sink(FLOW.destination, FLOW.renamer)
    assert (options["kafka.acks"], options["kafka.enable.idempotence"]) == ("all", "true")
    assert options["kafka.linger.ms"] == "20"
    assert options["kafka.interceptor.classes"] == "com.example.Audit"
    assert "kafka.dr.stream.runs.topic" not in options


def test_the_sink_renames_around_the_source_topic_and_keeps_partitions_unless_told():
    options = spark_options.sink(FLOW.destination, FLOW.renamer)
    assert (options["dr.stream.rename.prefix"], options["dr.stream.rename.suffix"]) == ("dc1.", "")
    assert options["dr.stream.preserve.partitions"] == "true"
    assert spark_options.sink(FLOW.destination, FLOW.renamer, preserve_partitions=False)[
        "dr.stream.preserve.partitions"] == "false"


def test_with_a_runs_topic_the_sink_reports_runs_under_the_flow_s_header():
    options = spark_options.sink(FLOW.destination, FLOW.renamer, runs_topic="__dr_stream_runs.f", header="__hdr")
    assert (options["kafka.dr.stream.runs.topic"], options["kafka.dr.stream.provenance.header"]) == (
        "__dr_stream_runs.f", "__hdr")


def test_the_sink_writes_provenance_only_when_told_the_source_cluster():
    assert "kafka.dr.stream.provenance.cluster" not in spark_options.sink(FLOW.destination, FLOW.renamer)
    options = spark_options.sink(FLOW.destination, FLOW.renamer, header="__hdr", provenance_cluster="SRC-id")
    assert (options["kafka.dr.stream.provenance.cluster"], options["kafka.dr.stream.provenance.header"]) == (
        "SRC-id", "__hdr")
    assert "kafka.dr.stream.runs.topic" not in options


def test_the_sink_s_requests_grow_to_the_largest_max_message_bytes_the_flow_syncs():
    def sink(cluster, largest):
        return spark_options.sink(cluster, FLOW.renamer, largest_message_bytes=largest)

    assert "kafka.max.request.size" not in sink(FLOW.destination, 1_000_000)
    options = sink(FLOW.destination, 3_000_000)
    assert (options["kafka.max.request.size"], options["kafka.buffer.memory"]) == ("3000000", "33554432")
    assert sink(FLOW.destination, 40_000_000)["kafka.buffer.memory"] == "80000000"
    own = parse_flow({"source": {"alias": "dc1", "bootstrap_servers": "a:1"},
                      "destination": {"alias": "dc2", "bootstrap_servers": "b:2",
                                      "kafka": {"max.request.size": "5000000"}}})
    assert sink(own.destination, 3_000_000)["kafka.max.request.size"] == "5000000"
    # A running sink is outgrown only by a limit above both its own size and the producer's default.
    assert not spark_options.outgrown(0, 1_000_000) and spark_options.outgrown(0, 2_000_000)
    assert not spark_options.outgrown(3_000_000, 3_000_000) and spark_options.outgrown(3_000_000, 3_000_001)


def test_a_batch_range_names_each_partition_s_start_and_end():
    options = spark_options.batch_range(FLOW.destination, {"t": {"1": 5}}, {"t": {"1": 9}})
    assert (options["assign"], options["startingOffsets"], options["endingOffsets"]) == (
        '{"t": [1]}', '{"t": {"1": 5}}', '{"t": {"1": 9}}')


def test_a_micro_batch_read_does_not_wait_at_the_log_end_and_the_flow_s_own_setting_wins():
    assert spark_options.replicate_source(FLOW)["kafka.fetch.max.wait.ms"] == "0"
    ranged = spark_options.batch_range(FLOW.destination, {"t": {"0": 0}}, {"t": {"0": 1}})
    assert ranged["kafka.fetch.max.wait.ms"] == "0"
    assert spark_options.batch_source(FLOW.destination, "t")["kafka.fetch.max.wait.ms"] == "0"
    own = parse_flow({"source": {"alias": "dc1", "bootstrap_servers": "a:1", "kafka": {"fetch.max.wait.ms": 100}},
                      "destination": {"alias": "dc2", "bootstrap_servers": "b:2"}})
    assert spark_options.replicate_source(own)["kafka.fetch.max.wait.ms"] == "100"


def test_real_time_mode_polls_continuously_and_keeps_the_client_s_fetch_wait():
    realtime = parse_flow({"source": {"alias": "dc1", "bootstrap_servers": "a:1"},
                           "destination": {"alias": "dc2", "bootstrap_servers": "b:2"},
                           "streaming": {"mode": "realtime"}})
    assert "kafka.fetch.max.wait.ms" not in spark_options.replicate_source(realtime)
