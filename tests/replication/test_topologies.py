"""Active-active and multi-hop topologies: nothing loops, nothing is duplicated."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from dr_stream.background import Background
from tests.flows import flow_config, running_flow
from tests.kafka_tools import (
    consume_all,
    count,
    create_topic,
    produce,
    provenance,
    topic_exists,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration


def _produce_steadily(bootstrap: str, topic: str, tag: str, seconds: float, per_second: int) -> int:
    sent, started = 0, time.monotonic()
    while time.monotonic() - started < seconds:
        batch = [{"key": f"{tag}{sent + i}".encode(), "value": f"{tag}-{sent + i}".encode(),
                  "partition": (sent + i) % 2} for i in range(per_second // 5)]
        sent += produce(bootstrap, topic, batch)
        time.sleep(0.2)
    return sent


def test_active_active_with_identical_topic_names_copies_every_record_once_and_never_loops(
    spark, dc1, dc2, topics, tmp_path
):
    topic = unique("aa.")
    topics.append(topic)
    for cluster in (dc1, dc2):
        create_topic(cluster.bootstrap, topic, 2)
    include = {"include": [topic.replace(".", "\\.")]}
    sent: dict[str, int] = {}

    def producer(cluster, tag):
        sent[tag] = _produce_steadily(cluster.bootstrap, topic, tag, seconds=30, per_second=100)

    with running_flow(spark, flow_config(dc1, dc2, tmp_path, topics=include)), \
            running_flow(spark, flow_config(dc2, dc1, tmp_path, topics=include)):
        threads = [Background(f"producer {t}", lambda c=c, t=t: producer(c, t)).start()
                   for c, t in ((dc1, "one"), (dc2, "two"))]
        for t in threads:
            t.join(timeout=120)
        total = sent["one"] + sent["two"]
        assert wait_until(lambda: count(dc1.bootstrap, topic) >= total and count(dc2.bootstrap, topic) >= total, 90)
        time.sleep(5)  # several more triggers of both flows: a loop would show up as growth
        stable = (count(dc1.bootstrap, topic), count(dc2.bootstrap, topic))

    assert stable == (total, total)
    for cluster, local_tag, other in ((dc1, "one", dc2), (dc2, "two", dc1)):
        records = consume_all(cluster.bootstrap, topic)
        values = Counter(r.value for r in records)
        assert len(values) == total and set(values.values()) == {1}, "every record exactly once"
        remote = [r for r in records if not r.value.startswith(local_tag.encode())]
        assert len(remote) == sent["two" if local_tag == "one" else "one"]
        assert all(len(provenance(r)) == 1 and provenance(r)[0]["cluster"] == other.cluster_id() for r in remote)


def test_two_hops_carry_both_provenance_headers_in_order(spark, dc1, dc2, dc3, topics, tmp_path):
    topic = unique("hop.")
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, 1)
    produce(dc1.bootstrap, topic, [{"key": b"k", "value": f"v{i}".encode()} for i in range(20)])
    include = {"include": [topic.replace(".", "\\.")]}
    with running_flow(spark, flow_config(dc1, dc2, tmp_path, topics=include)), \
            running_flow(spark, flow_config(dc2, dc3, tmp_path, topics=include)):
        assert wait_until(lambda: topic_exists(dc3.bootstrap, topic) and count(dc3.bootstrap, topic) == 20, 90)
    middle = {r.value: r for r in consume_all(dc2.bootstrap, topic)}
    for record in consume_all(dc3.bootstrap, topic):
        hops = provenance(record)
        assert [h["cluster"] for h in hops] == [dc1.cluster_id(), dc2.cluster_id()]
        assert hops[0]["offset"] == int(record.value[1:]), "first hop names the origin offset in dc1"
        assert hops[1]["offset"] == middle[record.value].offset, "second hop names the offset in dc2"
