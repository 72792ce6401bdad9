"""A flow joins the runs of a transactional source below every live position into spans, in its
store and in its offset index table, deletes from its runs topic what the table holds, and still
places every group position exactly: the live translation and a command with the flow stopped
both read the span's window back from the destination."""

from __future__ import annotations

import random

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from dr_stream.core.config import FlowConfig
from dr_stream.index.destination_tail import read_tail
from dr_stream.index.index_reads import IndexReads
from dr_stream.index.run_store import RunStore
from dr_stream.index.snapshot import index_snapshot
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.positions.consumer_timestamps import GroupCommit
from dr_stream.positions.offset_translator import OffsetTranslator
from dr_stream.runtime.delta_reads import DeltaReads
from tests.flows import flow_config, running_flow
from tests.kafka_tools import admin, count, create_topic, unique, wait_until

pytestmark = pytest.mark.integration

TRANSACTIONS = 250


def _transactions(bootstrap: str, topic: str, rng: random.Random) -> int:
    """Committed transactions of 1-8 records each (a commit marker's offset after each one);
    returns the records written."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("tx-"), "linger.ms": 0})
    producer.init_transactions(30)
    written = 0
    for t in range(TRANSACTIONS):
        producer.begin_transaction()
        for _ in range(rng.randint(1, 8)):
            producer.produce(topic, value=f"t{t}-{written}".encode(), partition=0)
            written += 1
        producer.commit_transaction(30)
    return written


def _exact(config: FlowConfig, source_id: str, topic: str, end: int) -> RunStore:
    """Every copy on the destination read back: the runs the answers must agree with."""
    with ClusterContext(config.destination) as destination:
        return RunStore(read_tail(destination, {(topic, 0): (0, end)}, config.provenance.header, source_id,
                                  config.renamer))


def _runs_topic_start(bootstrap: str, topic: str) -> int:
    found = admin(bootstrap).list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})
    return next(iter(found.values())).result().offset


def _commits(topic: str, origin_end: int) -> list[GroupCommit]:
    return [GroupCommit(f"g{o}", topic, 0, o) for o in range(0, origin_end + 2, 3)]


def _expected(exact: RunStore, key, offset: int, written: int) -> tuple[int, str]:
    """Where the copies read back whole place `offset`: the first copy at or after it, or just
    past the last copy."""
    found = exact.locate(key, offset)
    return (found.offset, "exact") if found.method == "exact" else (written, "next")


def test_runs_below_every_live_position_become_spans_and_every_position_stays_exact(spark, dc1, dc2, topics,
                                                                                     tmp_path):
    topic = unique("spans.")
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, 1)
    written = _transactions(dc1.bootstrap, topic, random.Random(9))
    config = flow_config(dc1, dc2, tmp_path, topics={"include": [topic.replace(".", "\\.")]})
    key = (topic, 0, topic, 0)
    with running_flow(spark, config) as flow:
        feed = flow.feed
        assert feed is not None and flow.translate_loop is not None
        assert wait_until(lambda: count(dc2.bootstrap, topic) == written, 90)
        assert wait_until(lambda: feed.handled.counted.get((topic, 0), 0) >= written + TRANSACTIONS - 1, 60)
        runs_before = len(feed.store.runs_of(key))
        feed.max_slack = 60
        assert feed.trim is not None
        feed.trim.after_s = 0.0  # the runs topic keeps nothing the table holds
        feed.write()  # the table holds every run, so its rewrite spans them too

        feed.maintain()

        assert feed.trim.trimmed_through > 0 and _runs_topic_start(dc2.bootstrap, flow.runs_topic) > 0

        held = feed.store.runs_of(key)
        assert len(held) < runs_before / 4, (len(held), runs_before)
        assert any(r.copies is not None for r in held)
        exact = _exact(config, dc1.cluster_id(), topic, written)
        origin_end = max(r.origin_end for r in exact.runs_of(key))
        commits = _commits(topic, origin_end)
        assert sum(feed.store.locate(key, c.offset).method == "within" for c in commits) > len(commits) / 2

        live = flow.translate_loop.translator.translate(commits)
        expected = {c.offset: _expected(exact, key, c.offset, written) for c in commits}

        assert {t.source_offset: (t.offset, t.method) for t in live} == expected

    index = IndexReads(config.streaming.offset_index, DeltaReads())
    rows = index.runs(dc1.cluster_id())
    assert any(r.copies is not None for r in rows) and len(rows) < runs_before / 4
    said: list[str] = []
    # a command's view: the table, the runs topic past it (trimmed) and the destination's tail
    with ClusterContext(config.destination) as destination:
        stored = index_snapshot(config, index, dc1.cluster_id(), [(topic, 0)], destination, said.append,
                                asked={(topic, 0): 0})
        assert not any("starts at offset" in line for line in said), said
        translator = OffsetTranslator(stored.locate, config.renamer, destination, header=config.provenance.header)
        try:
            stopped = translator.translate(commits)
        finally:
            translator.close()
    assert {t.source_offset: (t.offset, t.method) for t in stopped} == expected
