"""`dr-stream adopt` against a real MirrorMaker 2 4.3 that copied a topic under load, was killed
(so it wrote part of it twice) and stopped: the flow takes the copies over, copies only what
follows, and a group fails over exactly through the adopted history."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from bench.replicators import mirror_maker
from dr_stream.core.config import FlowConfig
from dr_stream.operations.adopt import AdoptRefused, adopt
from dr_stream.operations.failover import failover
from dr_stream.operations.flow_tables import FlowTables
from tests.flows import flow_config, running_flow
from tests.kafka_tools import (
    add_partitions,
    admin,
    committed,
    consume_all,
    consume_and_commit,
    count_once_created,
    create_topic,
    delete_groups,
    delete_topics,
    end_offsets,
    produce,
    read_range,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration

PARTITIONS = 3
FIRST, UNDER_LOAD, AFTER = 6_000, 4_000, 1_000  # records per partition: before, while and after MirrorMaker 2 ran
COPIED = FIRST + UNDER_LOAD
GROWN = 100  # records of the partition the source topic gained after MirrorMaker 2 stopped


def records(first: int, last: int):
    """Per partition p, records `p:i` for i in [first, last): record i of a partition is at offset i."""
    return ({"key": f"k{i}".encode(), "value": f"{p}:{i}".encode(), "partition": p}
            for i in range(first, last) for p in range(PARTITIONS))


def origin(record) -> tuple[int, int]:
    p, i = record.value.decode().split(":")
    return int(p), int(i)


def produce_slowly(bootstrap: str, topic: str) -> None:
    """The records written while MirrorMaker 2 copies: 400 per partition every 0.2 s."""
    for i in range(FIRST, COPIED, 400):
        produce(bootstrap, topic, records(i, i + 400))
        time.sleep(0.2)


def mm2_properties(directory: Path, source: str, destination: str, topic: str, groups: str) -> Path:
    path = directory / "mm2.properties"
    path.write_text("\n".join([
        "clusters = dc1, dc2", f"dc1.bootstrap.servers = {source}", f"dc2.bootstrap.servers = {destination}",
        "dc1->dc2.enabled = true", "dc2->dc1.enabled = false", f"dc1->dc2.topics = {topic}",
        f"dc1->dc2.groups = {groups}", "tasks.max = 1",
        *(f"{k}.replication.factor = 1" for k in ("checkpoints.topic", "heartbeats.topic", "offset-syncs.topic",
                                                  "offset.storage", "status.storage", "config.storage")),
        "replication.factor = 1", "sync.topic.acls.enabled = false", "offset-syncs.topic.location = target",
        "sync.group.offsets.enabled = true", "sync.group.offsets.interval.seconds = 1",
        "emit.checkpoints.interval.seconds = 1", "emit.heartbeats.interval.seconds = 1",
        "refresh.topics.interval.seconds = 2", "refresh.groups.interval.seconds = 2",
        # Its source positions are never committed within the test: the kill makes it copy
        # everything again from the start, as an at-least-once copy does after a crash (its offset
        # syncs, which the group sync translates through, are written as records are acked).
        "dc2.offset.flush.interval.ms = 600000", "dc1.consumer.fetch.max.wait.ms = 50", "",
    ]))
    return path


def topics_of(bootstrap: str) -> set[str]:
    return set(admin(bootstrap).list_topics(timeout=10).topics)


def groups_of(bootstrap: str) -> set[str]:
    from dr_stream.kafka.group_offsets.consumer_groups import list_groups

    return set(list_groups(admin(bootstrap), timeout=30))


@pytest.fixture
def mm2_copy(dc1, dc2, tmp_path):
    """A topic MirrorMaker 2 copied to dc2 as `dc1.<topic>`, killed once before it committed where it
    was (so it copied the first round twice) and then stopped, with group `<g>` committed on dc1 at
    7,000 while it ran (and synced by it to dc2) and at 9,000 after; then 1,000 records per
    partition it never saw, and a partition more with 100 records. Everything it made is deleted
    after."""
    topic, group = unique("adopt.orders."), unique("adg-")
    remote = f"dc1.{topic}"
    before = {c.bootstrap: (topics_of(c.bootstrap), groups_of(c.bootstrap)) for c in (dc1, dc2)}
    create_topic(dc1.bootstrap, topic, partitions=PARTITIONS)
    produce(dc1.bootstrap, topic, records(0, FIRST))
    properties = mm2_properties(tmp_path, dc1.bootstrap, dc2.bootstrap, topic, group.replace("-", "\\-") + ".*")
    log = tmp_path / "mm2.log"
    mm2 = mirror_maker(properties, log, heap="512M")
    try:
        mm2.start()
        assert wait_until(lambda: count_once_created(dc2.bootstrap, remote) >= FIRST * PARTITIONS, 180, interval=0.5), (
            f"MirrorMaker 2 did not copy the first {FIRST} records per partition in 180 s; see {log}")
        mm2.kill9()
        mm2 = mirror_maker(properties, log, heap="512M")
        mm2.start()
        load = threading.Thread(target=produce_slowly, args=(dc1.bootstrap, topic))
        load.start()
        consume_and_commit(dc1.bootstrap, topic, group, dict.fromkeys(range(PARTITIONS), 7_000), helper=False)
        load.join()
        assert wait_until(lambda: len(committed(dc2.bootstrap, group, remote, PARTITIONS)) == PARTITIONS, 120, 1), (
            f"MirrorMaker 2 did not sync group {group} to dc2 in 120 s; see {log}")
        source = {(p, i) for p in range(PARTITIONS) for i in range(COPIED)}
        assert wait_until(lambda: source <= {origin(r) for r in consume_all(dc2.bootstrap, remote)}, 180, 2), (
            f"MirrorMaker 2 did not copy every record in 180 s; see {log}")
        mm2.check_alive()
        mm2.stop()
        consume_and_commit(dc1.bootstrap, topic, group, dict.fromkeys(range(PARTITIONS), 9_000), helper=False)
        produce(dc1.bootstrap, topic, records(COPIED, COPIED + AFTER))
        add_partitions(dc1.bootstrap, topic, PARTITIONS + 1)
        produce(dc1.bootstrap, topic, ({"key": b"k", "value": f"{PARTITIONS}:{i}".encode(), "partition": PARTITIONS}
                                       for i in range(GROWN)))
        yield topic, remote, group
    finally:
        mm2.stop()
        for c in (dc1, dc2):
            topics, groups = before[c.bootstrap]
            delete_topics(c.bootstrap, sorted(topics_of(c.bootstrap) - topics))
            delete_groups(c.bootstrap, sorted(groups_of(c.bootstrap) - groups))


def adopting_flow(dc1, dc2, work: Path, topic: str, group: str) -> FlowConfig:
    return flow_config(dc1, dc2, work, name=unique("adopt-"), topics={"include": [topic.replace(".", "\\.")],
                                                                      "rename": "dc1.${topic}"},
                       offsets={"groups": {"include": [group.replace("-", "\\-") + ".*"]}})


def test_a_mirror_maker_2_copy_is_taken_over_exactly_and_copying_resumes_after_it(spark, dc1, dc2, tmp_path,
                                                                                  mm2_copy):
    topic, remote, group = mm2_copy
    config = adopting_flow(dc1, dc2, tmp_path / "flow", topic, group)
    mm2_group = committed(dc2.bootstrap, group, remote, PARTITIONS)
    copies = consume_all(dc2.bootstrap, remote)
    mm2_end = {p: high for p, (_, high) in end_offsets(dc2.bootstrap, remote).items()}
    # the copy a consumer reaches last of each record: where an exact position of that record is
    last_copy = {origin(r): r.offset for r in copies}

    said: list[str] = []
    dry = adopt(config, spark, "mirrormaker2", dry_run=True, say=said.append)
    assert [w.kept for w in dry.walks] == [COPIED] * PARTITIONS
    # the partition MirrorMaker 2 never saw has none of its number to adopt: said, and left to the flow
    assert dry.beyond == {topic: PARTITIONS}, said
    assert any(line.startswith(f"{topic}: partitions {PARTITIONS}-{PARTITIONS} have none") for line in said), said
    assert not FlowTables.of(config).index.runs(), "a dry run wrote to the offset index"
    assert committed(dc2.bootstrap, group, remote, PARTITIONS) == mm2_group, "a dry run moved a group"

    adoption = adopt(config, spark, "mirrormaker2", say=said.append)

    for walk in adoption.walks:
        assert (walk.kept, walk.unmatched, walk.uncopied, walk.resume_at) == (COPIED, 0, 0, COPIED), walk_of(walk)
        assert walk.records == mm2_end[walk.partition] and walk.origin_range == (0, COPIED - 1)
    # the kill made MirrorMaker 2 write the first round again: each record is adopted once, at its
    # later copy
    assert sum(w.duplicates for w in adoption.walks) == len(copies) - COPIED * PARTITIONS
    assert all(w.duplicates >= FIRST for w in adoption.walks), [walk_of(w) for w in adoption.walks]
    assert adoption.exact and adoption.groups_taken == [group], said
    # its approximate positions (at or before 7,000) replaced by the exact one of the commit at 9,000
    assert all(mm2_group[p] <= last_copy[(p, 7_000)] for p in range(PARTITIONS)), mm2_group
    assert committed(dc2.bootstrap, group, remote, PARTITIONS) == {p: last_copy[(p, 9_000)]
                                                                    for p in range(PARTITIONS)}
    with pytest.raises(AdoptRefused, match="already adopted"):
        adopt(config, spark, "mirrormaker2", say=said.append)

    lines: list[str] = []
    with running_flow(spark, config, log=lines.append) as flow:
        assert wait_until(lambda: all(flow.feed.last_copied().get((topic, p), -1) >= COPIED + AFTER - 1
                                      for p in range(PARTITIONS)), 180, 1), "the flow did not copy what followed"
        after = read_range(dc2.bootstrap, remote, mm2_end, end_offsets(dc2.bootstrap, remote))
        # nothing adopted copied again, nothing skipped: exactly the records MirrorMaker 2 never saw
        assert sorted(origin(r) for r in after) == sorted((p, i) for p in range(PARTITIONS)
                                                          for i in range(COPIED, COPIED + AFTER))
        assert any("read from where the adopted copies end" in line for line in lines), \
            "the first start read the source from its start"
        # the grown partition: added on dc2 and copied from its start by the flow
        assert wait_until(lambda: flow.feed.last_copied().get((topic, PARTITIONS), -1) >= GROWN - 1, 120, 1), \
            "the flow did not copy the partition adopt left to it"
        grown = [r for r in consume_all(dc2.bootstrap, remote) if r.partition == PARTITIONS]
        assert sorted(origin(r) for r in grown) == [(PARTITIONS, i) for i in range(GROWN)]
        failover_group = f"{group}-f"
        consume_and_commit(dc1.bootstrap, topic, failover_group, dict.fromkeys(range(PARTITIONS), 9_500), helper=False)
        moved = failover(config, FlowTables.of(config), failover_group)

    assert {r.translation.method for r in moved.rows} == {"exact"}, moved.rows
    resumed = read_range(dc2.bootstrap, remote, committed(dc2.bootstrap, failover_group, remote, PARTITIONS),
                         end_offsets(dc2.bootstrap, remote))
    # 0 re-read, 0 skipped: every record from 9,500 on, once, across the adopted and the flow's copies
    assert sorted(origin(r) for r in resumed) == sorted((p, i) for p in range(PARTITIONS)
                                                        for i in range(9_500, COPIED + AFTER))


def walk_of(walk) -> str:
    from dr_stream.replication.adoption import walk_line

    return walk_line(walk)
