"""A flow and its parts connect to nothing until they are started: building one is pure wiring."""

from __future__ import annotations

from dr_stream.core.config import parse_flow
from dr_stream.index.run_store import RunStore
from dr_stream.index.runs_topic import RunsReader
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.positions.consumer_timestamps import RecordTimestamps
from dr_stream.positions.group_sync import GroupSync
from dr_stream.positions.offset_translator import OffsetTranslator
from dr_stream.positions.returned_records import ReturnedRecords
from dr_stream.replication.flow import build_flow

# Nothing listens on port 1: a part that connected while being built would fail or hang here.
NOWHERE = parse_flow({
    "source": {"alias": "dc1", "bootstrap_servers": "127.0.0.1:1"},
    "destination": {"alias": "dc2", "bootstrap_servers": "127.0.0.1:1"},
    "streaming": {"checkpoint_dir": "hdfs://nn/flows/x/checkpoints", "offset_index": "s3a://b/flows/x/offset-index"},
})


def test_constructing_a_flow_connects_to_nothing_and_names_its_queries_and_state(spark):
    flow = build_flow(NOWHERE, spark)
    assert not flow.connected
    assert (flow.translate_loop, flow.feed, flow.poller) == (None, None, None)
    assert flow.index.path == "s3a://b/flows/x/offset-index"
    assert flow.runs_topic == "__dr_stream_runs.dc1-to-dc2"
    assert flow.progress.query_name == "replicate-dc1-to-dc2"
    assert NOWHERE.replicate_checkpoint == "hdfs://nn/flows/x/checkpoints/replicate"
    assert (NOWHERE.translate_query, NOWHERE.translate_checkpoint) == (
        "translate-dc1-to-dc2", "hdfs://nn/flows/x/checkpoints/translate")


def test_the_offsets_parts_open_their_clients_only_at_first_use(spark):
    source, destination = ClusterContext(NOWHERE.source), ClusterContext(NOWHERE.destination)
    translator = OffsetTranslator(RunStore().locate, NOWHERE.renamer, destination,
                                  source=source, returned=ReturnedRecords(source, "h", "id", destination=destination))
    reader = RunsReader(destination, "__dr_stream_runs.x")
    sync = GroupSync(destination, NOWHERE.name)
    stamps = RecordTimestamps(source)
    assert source._admin is None and destination._admin is None and not translator._dest_consumer.opened
    assert not translator.returned._consumer.opened and not stamps._consumer.opened and sync._offsets is None
    assert not translator.returned._dest_consumer.opened
    assert not reader._consumer.opened
    reader.close()
    translator.close()
    stamps.close()
    assert not translator.returned._consumer.opened and not translator.returned._dest_consumer.opened
