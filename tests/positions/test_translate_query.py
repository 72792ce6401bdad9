"""The translate query on real brokers and a real Spark: a Structured Streaming query of its own,
checkpointed beside the replicate query, which reads on from its checkpoint after a restart
and finishes what the last run left pending in the translation log.

Positions are written to `__consumer_timestamps` by a client helper at its commit: the query
takes each once the poller has read the commit behind it (`commit_backing`).
"""

from __future__ import annotations

import re
import time

import pytest

from dr_stream.core.contracts import CONSUMER_TIMESTAMPS_TOPIC
from dr_stream.positions.consumer_timestamps import GroupCommit
from dr_stream.positions.sync_outcome import COMMITTED
from dr_stream.positions.translation_log import TranslationLog
from dr_stream.positions.translation_rule import Translation
from tests.flows import flow_config, running_flow
from tests.kafka_tools import (
    committed,
    consume_and_commit,
    create_topic,
    delete_groups,
    delete_topics,
    end_offsets,
    produce,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration


def write_position(bootstrap: str, group: str, topic: str, offset: int) -> None:
    """A client helper's commit: the group's offset on the source and its record in the topic."""
    consume_and_commit(bootstrap, topic, group, {0: offset}, helper=True)


def written(bootstrap: str) -> int:
    """Records ever written to `__consumer_timestamps` (its end offsets)."""
    return sum(high for _, high in end_offsets(bootstrap, CONSUMER_TIMESTAMPS_TOPIC).values())


def translate_query(spark, config):
    found = [q for q in spark.streams.active if q.name == config.translate_query]
    return found[0] if found else None


def rows_read(spark, config) -> int:
    """Records the running translate query has read, by its progress (reported once a batch ended)."""
    query = translate_query(spark, config)
    return -1 if query is None else sum(p.numInputRows for p in query.recentProgress)


@pytest.fixture
def scenario(dc1, dc2, tmp_path):
    """A topic of 100 records on dc1, and a flow copying it whose groups are `tq-<id>-*`."""
    topic, prefix = unique("tq."), unique("tq-")
    create_topic(dc1.bootstrap, topic, partitions=1)
    produce(dc1.bootstrap, topic, ({"key": b"k", "value": f"v{i}".encode(), "partition": 0} for i in range(100)))
    config = flow_config(dc1, dc2, tmp_path, name=prefix.rstrip("-"), topics={"include": [re.escape(topic)]},
                         offsets={"groups": {"include": [re.escape(prefix) + ".*"]}})
    try:
        yield config, topic, prefix
    finally:
        delete_topics(dc1.bootstrap, [topic])
        delete_topics(dc2.bootstrap, [topic])
        delete_groups(dc2.bootstrap, [prefix + g for g in ("a", "b", "left")])


def copied(flow, topic: str) -> bool:
    return flow.feed is not None and flow.feed.last_copied().get((topic, 0), -1) >= 99


def test_a_restarted_translate_query_reads_on_from_its_checkpoint_not_from_the_first_record(spark, dc1, dc2, scenario):
    config, topic, prefix = scenario
    group = prefix + "a"
    with running_flow(spark, config) as flow:
        assert wait_until(lambda: copied(flow, topic), 120, interval=0.5)
        write_position(dc1.bootstrap, group, topic, 40)
        assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 1) == {0: 40}, 60)
        assert wait_until(lambda: rows_read(spark, config) >= 1, 30)

    stopped_at = written(dc1.bootstrap)
    lines: list[str] = []
    with running_flow(spark, config, log=lines.append) as flow:
        assert wait_until(lambda: translate_query(spark, config) is not None, 60)
        write_position(dc1.bootstrap, group, topic, 60)
        assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 1) == {0: 60}, 60)
        assert wait_until(lambda: rows_read(spark, config) >= 1, 30)
        time.sleep(1)  # a few more triggers
        # Read from the first record, the topic would give this restart every position the tests
        # have written to dc1 so far, the two of the first run (the helper's and the poller's)
        # among them; from its checkpoint, what was written since, and the one of those two the
        # first run may not have read before it stopped.
        since = written(dc1.bootstrap) - stopped_at
        assert rows_read(spark, config) <= since + 1, [p.json for p in translate_query(spark, config).recentProgress]


def test_a_position_the_last_run_left_not_final_is_translated_and_synced_after_a_restart(spark, dc1, dc2, scenario):
    config, topic, prefix = scenario
    group = prefix + "left"
    # The last run's translation log says: translated as `next` (its copy not indexed yet), synced
    # provisionally. The position itself is in no record the query will read.
    left = Translation(group=group, topic=topic, partition=0, source_offset=30, source_timestamp=1_000,
                       dest_topic=topic, dest_partition=0, offset=29, method="next", note="", clamped=False,
                       log_start=0, log_end=0, last_copied=None, source_log_end=None,
                       translated_at=int(time.time() * 1000))
    TranslationLog(config.streaming.translations, spark=spark).append([(left, COMMITTED)])
    lines: list[str] = []
    with running_flow(spark, config, log=lines.append) as flow:
        assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 1) == {0: 30}, 120)
        assert wait_until(lambda: (group, topic, 0) not in flow.translate_loop.pending, 30)
    assert ("translation: 1 positions a stopped run left not final or not synced are translated again (from the "
            "translation log)") in lines, lines
    newest = {(r["group"], r["partition"]): r for r in TranslationLog(config.streaming.translations).latest()}
    assert (newest[(group, 0)]["method"], newest[(group, 0)]["offset"]) == ("exact", 30)


def test_a_position_record_no_source_commit_backs_moves_no_destination_group_and_is_said(spark, dc1, dc2, scenario):
    """Anyone with WRITE on `__consumer_timestamps` can write any group's record: one ahead of
    what the group committed on the source is held, said, and taken once the group commits there."""
    config, topic, prefix = scenario
    group = prefix + "b"
    lines: list[str] = []
    with running_flow(spark, config, log=lines.append) as flow:
        flow.translate_loop.backing.grace_s = 1.0
        assert wait_until(lambda: copied(flow, topic), 120, interval=0.5)
        write_position(dc1.bootstrap, group, topic, 40)
        assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 1) == {0: 40}, 60)
        forged = GroupCommit(group, topic, 0, 90, int(time.time() * 1000))
        produce(dc1.bootstrap, CONSUMER_TIMESTAMPS_TOPIC, [{"key": forged.record_key(),
                                                            "value": forged.record_value()}])
        said = (f"group {group}: __consumer_timestamps says {topic}[0] is at 90, but no commit on the source "
                "reached it for 1 s (highest seen: 40)")
        assert wait_until(lambda: any(line.startswith(said) for line in lines), 60), lines[-20:]
        assert committed(dc2.bootstrap, group, topic, 1) == {0: 40}
        assert flow.translate_loop.totals["unbacked"] == 1
        write_position(dc1.bootstrap, group, topic, 90)  # the group does commit there
        assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 1) == {0: 90}, 60)
