"""The flow's poller hands its positions to the translation as it writes them: translated at
the step thread's next step, and the same positions arriving later in a batch of the translate
query change nothing. The rule with stand-ins for the translator and the destination, then the
poller's side against a real cluster."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from dr_stream.core.config import ClusterConfig
from dr_stream.core.contracts import CONSUMER_TIMESTAMPS_TOPIC
from dr_stream.core.policy import GroupFilter, TopicFilter
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.kafka.group_offsets import Committed
from dr_stream.positions.consumer_timestamps import GroupCommit, ensure_topic
from dr_stream.positions.live_translation import LiveTranslation
from dr_stream.positions.poller import CommittedOffsetPoller
from tests.kafka_tools import admin, create_topic, delete_topics, produce, unique
from tests.positions.test_live_translation_retry import _Destination, commit, loop


def counting_loop(destination: _Destination, rounds: list[int]) -> LiveTranslation:
    return loop(destination, [], on_round=lambda took, n, period: rounds.append(n))


def test_offered_positions_are_synced_at_the_next_step_without_their_records():
    destination, rounds = _Destination(refusals=0), []
    translate = counting_loop(destination, rounds)
    translate.offer([GroupCommit("app", "orders", 0, 40, 1000), GroupCommit("app", "orders", 1, 7, 1000)])

    translate.step()

    assert destination.offsets == {("app", "orders", 0): 45, ("app", "orders", 1): 12}
    assert rounds == [2]


def test_their_records_arriving_later_start_no_round():
    destination, rounds = _Destination(refusals=0), []
    translate = counting_loop(destination, rounds)
    translate.offer([GroupCommit("app", "orders", 0, 40, 1000)])
    translate.step()

    assert translate.take_batch([commit(40)]) == []

    assert rounds == [1]
    assert translate.totals["commits"] == 1


def test_a_record_written_after_them_for_the_same_key_still_replaces_them():
    destination, rounds = _Destination(refusals=0), []
    translate = counting_loop(destination, rounds)
    translate.offer([GroupCommit("app", "orders", 0, 40, 1000)])
    translate.step()

    translate.take_batch([commit(55)])  # a client helper's newer position follows in the topic

    assert destination.offsets[("app", "orders", 0)] == 60
    assert rounds == [1, 1]


def test_offers_from_another_thread_are_all_taken():
    destination, rounds = _Destination(refusals=0), []
    translate = counting_loop(destination, rounds)
    threads = [threading.Thread(target=translate.offer, args=([GroupCommit(f"g{i}", "orders", 0, i, 1)],))
               for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    translate.step()

    assert len(destination.offsets) == 20


class _Positions:
    """One group's committed position, as the poller's reader returns it."""

    name = "stand-in"

    def __init__(self, group: str, topic: str, offset: int) -> None:
        self.fetched = {group: {(topic, 0): Committed(offset)}}

    def read(self, full):
        return 1, self.fetched

    def unread(self):
        return frozenset()

    def close(self):
        pass


@pytest.mark.integration
def test_the_poller_hands_over_each_moved_position_stamped_and_writes_the_same_to_the_topic(dc1):
    topic, group = unique("handoff."), unique("hg-")
    create_topic(dc1.bootstrap, topic, partitions=1)
    try:
        produce(dc1.bootstrap, topic, ({"key": b"k", "value": b"v", "partition": 0} for _ in range(10)))
        ensure_topic(admin(dc1.bootstrap))
        cluster = ClusterContext(ClusterConfig("dc1", dc1.bootstrap))
        handed: list[list[GroupCommit]] = []
        poller = CommittedOffsetPoller(cluster, GroupFilter(), TopicFilter((topic,)), log=lambda line: None,
                                       on_stamped=handed.append)
        poller.open(_Positions(group, topic, 6))
        try:
            assert poller.poll_once() == 1
        finally:
            poller.close()

        assert len(handed) == 1
        [given] = handed[0]
        assert (given.group, given.topic, given.partition, given.offset) == (group, topic, 0, 6)
        assert given.timestamp > 0  # the timestamp of record 5, looked up before the hand-over
        assert _written(dc1.bootstrap, given) == (given.record_key(), given.record_value())
    finally:
        delete_topics(dc1.bootstrap, [topic])


def _written(bootstrap: str, wanted: GroupCommit) -> tuple[bytes, bytes] | None:
    """The newest record of `__consumer_timestamps` with the position's key."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dr-stream-tests-peek",
                         "enable.partition.eof": True})
    try:
        topics = consumer.list_topics(CONSUMER_TIMESTAMPS_TOPIC, timeout=10).topics
        partitions = topics[CONSUMER_TIMESTAMPS_TOPIC].partitions
        consumer.assign([TopicPartition(CONSUMER_TIMESTAMPS_TOPIC, p, 0) for p in partitions])
        found, ended, deadline = None, set(), time.monotonic() + 30
        while len(ended) < len(partitions) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=5):
                if msg.error() is not None:
                    ended.add(msg.partition())
                elif msg.key() == wanted.record_key():
                    found = (msg.key(), msg.value())
        return found
    finally:
        consumer.close()
