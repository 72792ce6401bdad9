"""A provenance header is a claim: a record is filtered as come back only when a run of the flow
that copied it says so, so a forged header hides no record (real brokers, real Spark)."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from dr_stream.core.contracts import runs_topic
from dr_stream.index.runs_topic import trim_runs_topic
from tests.flows import flow_config, running_flow
from tests.kafka_tools import (
    admin,
    consume_all,
    count,
    create_topic,
    end_offsets,
    produce,
    provenance,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration


def _forged(cluster_id: str, topic: str, offset: int) -> tuple[str, bytes]:
    entry = {"cluster": cluster_id, "topic": topic, "partition": 0, "offset": offset,
             "timestamp": int(time.time() * 1000)}
    return ("__replicator_id", json.dumps(entry).encode())


def _unconfirmed(flow, topic: str) -> float:
    return next((s.value for m in flow.metrics.collect() for s in m.samples
                 if s.name == "dr_stream_provenance_unconfirmed_total" and s.labels.get("topic") == topic), 0.0)


def test_a_header_forged_to_name_the_destination_is_copied_and_counted_while_real_copies_still_stop(
    spark, dc1, dc2, topics, tmp_path
):
    topic = unique("forged.")
    topics.append(topic)
    for cluster in (dc1, dc2):
        create_topic(cluster.bootstrap, topic, 1)
    include = {"include": [topic.replace(".", "\\.")]}
    lines: list[str] = []
    with running_flow(spark, flow_config(dc1, dc2, tmp_path, topics=include), log=lines.append) as forward, \
            running_flow(spark, flow_config(dc2, dc1, tmp_path, topics=include)):
        produce(dc2.bootstrap, topic, [{"key": b"k", "value": f"two-{i}".encode()} for i in range(20)])
        assert wait_until(lambda: count(dc1.bootstrap, topic) == 20, 90)
        # A producer on dc1 claims its record is dc2's record at offset 3 of the topic: copying it
        # back would loop, were the claim true.
        forged = _forged(dc2.cluster_id(), topic, 3)
        produce(dc1.bootstrap, topic, [{"key": b"k", "value": b"forged", "headers": [forged]},
                                       {"key": b"k", "value": b"one-0"}])
        # dc2's later records put a run of dc2 -> dc1 past the forged record's offset on dc1
        produce(dc2.bootstrap, topic, [{"key": b"k", "value": f"two-{i}".encode()} for i in range(20, 30)])
        assert wait_until(lambda: count(dc2.bootstrap, topic) == 32 and count(dc1.bootstrap, topic) == 32, 90)
        assert wait_until(lambda: _unconfirmed(forward, topic) == 1, 30)
        time.sleep(3)  # more triggers of both flows: a loop would show up as growth
        stable = (count(dc1.bootstrap, topic), count(dc2.bootstrap, topic))

    assert stable == (32, 32)
    on_dc2 = consume_all(dc2.bootstrap, topic)
    assert set(Counter(r.value for r in on_dc2).values()) == {1}, "every record once: dc2's own came back nowhere"
    forged = next(r for r in on_dc2 if r.value == b"forged")
    assert [e["cluster"] for e in provenance(forged)] == [dc2.cluster_id(), dc1.cluster_id()]
    assert any("1 copied though a header claims they came from the destination" in line for line in lines)
    assert any(line.startswith(f"{topic}-0: 1 record claiming to come back from the destination copied")
               for line in lines)


def test_a_flow_that_does_not_forward_copies_a_record_whose_header_names_a_cluster_no_flow_copied_from(
    spark, dc1, dc2, topics, tmp_path
):
    topic = unique("forged-mesh.")
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, 1)
    include = {"include": [topic.replace(".", "\\.")]}
    config = flow_config(dc1, dc2, tmp_path, topics=include, provenance={"forward": False})
    with running_flow(spark, config) as flow:
        # two forged records in one partition: the second waits for no run the first waited for
        produce(dc1.bootstrap, topic, [{"key": b"k", "value": f"forged-{i}".encode(),
                                        "headers": [_forged("a-cluster-no-flow-copies-from", "elsewhere", i)]}
                                       for i in range(2)] + [{"key": b"k", "value": b"own"}])
        assert wait_until(lambda: count(dc2.bootstrap, topic) == 3, 120)
        assert wait_until(lambda: _unconfirmed(flow, topic) == 2, 30)
    assert sorted(r.value for r in consume_all(dc2.bootstrap, topic)) == [b"forged-0", b"forged-1", b"own"]


def test_copies_whose_runs_are_trimmed_are_confirmed_by_their_originals_and_not_copied_back(
    spark, dc1, dc2, topics, tmp_path
):
    topic = unique("trimmed.")
    topics.append(topic)
    create_topic(dc1.bootstrap, topic, 1)
    include = {"include": [topic.replace(".", "\\.")]}
    forward = flow_config(dc1, dc2, tmp_path, topics=include)
    produce(dc1.bootstrap, topic, [{"key": b"k", "value": f"one-{i}".encode()} for i in range(30)])
    with running_flow(spark, forward):
        assert wait_until(lambda: count(dc2.bootstrap, topic) == 30, 90)
    # What a failback flow started days later finds: the forward flow's runs long trimmed.
    runs = runs_topic(forward.name)
    trim_runs_topic(admin(dc2.bootstrap), runs, end_offsets(dc2.bootstrap, runs)[0][1] - 1)
    lines: list[str] = []
    with running_flow(spark, flow_config(dc2, dc1, tmp_path, topics=include), log=lines.append) as back:
        produce(dc2.bootstrap, topic, [{"key": b"k", "value": b"two-0"}])
        assert wait_until(lambda: count(dc1.bootstrap, topic) == 31, 90)
        time.sleep(3)
        assert count(dc1.bootstrap, topic) == 31, "dc1's own records came back"
        assert _unconfirmed(back, topic) == 0
    assert sorted(r.value for r in consume_all(dc1.bootstrap, topic))[-1] == b"two-0"
