"""Every producer dr-stream builds is idempotent, so a batch refused for a moment and sent again
cannot land behind the batches sent after it."""

from __future__ import annotations

import json

import pytest

from dr_stream.core.config import ClusterConfig
from dr_stream.kafka import clients
from tests.kafka_tools import create_topic, delete_topics, unique


@pytest.mark.integration
def test_a_producer_is_given_a_producer_id_by_the_broker_as_idempotent_ones_are(dc1):
    topic = unique("idempotent.")
    create_topic(dc1.bootstrap, topic, partitions=1)
    stats: list[dict] = []
    try:
        producer = clients.producer(ClusterConfig("dc1", dc1.bootstrap),
                                    {"statistics.interval.ms": 100, "stats_cb": lambda s: stats.append(json.loads(s))})
        producer.produce(topic, b"v")
        assert producer.flush(30) == 0
        for _ in range(50):
            producer.poll(0.1)
            if stats and stats[-1].get("eos", {}).get("producer_id", -1) >= 0:
                break
        eos = stats[-1].get("eos", {}) if stats else {}
        assert eos.get("idemp_state") == "Assigned" and eos.get("producer_id", -1) >= 0, eos
    finally:
        delete_topics(dc1.bootstrap, [topic])
