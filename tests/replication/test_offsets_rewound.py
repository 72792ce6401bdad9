"""A source partition whose log is cut back below what was already copied (an unclean leader
election, a truncation) is recorded as `offsets-rewound`, and the records the source writes at
those offsets again are copied once, after the old copies, with groups placed on them (real
brokers, real Spark: the source broker is killed and its segment cut at a batch boundary)."""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import time
from pathlib import Path

import pytest

from dr_stream.replication.losses import LossLedger
from tests.clusters import started_cluster
from tests.flows import flow_config, running_flow
from tests.kafka_tools import (
    committed,
    consume_all,
    consume_and_commit,
    create_topic,
    delete_topics,
    end_offsets,
    produce,
    provenance,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration


def batch_starts(segment: bytes) -> dict[int, int]:
    """Base offset -> byte position of each record batch of a log segment (a batch begins with its
    base offset, 8 bytes, and the length of the rest, 4 bytes)."""
    out, position = {}, 0
    while position + 12 <= len(segment):
        base, length = struct.unpack(">qi", segment[position:position + 12])
        out[base] = position
        position += 12 + length
    return out


def cut_back(home: Path, topic: str, offset: int) -> None:
    """Cuts partition 0's log back to `offset` (a batch boundary), as an unclean election does;
    the broker must be down, and rebuilds its indexes when it starts."""
    folder = home / "data" / f"{topic}-0"
    segment = folder / "00000000000000000000.log"
    with open(segment, "r+b") as f:
        f.truncate(batch_starts(segment.read_bytes())[offset])
    for index in [*folder.glob("*.index"), *folder.glob("*.timeindex")]:
        index.unlink()


def dest_end(bootstrap: str, topic: str) -> int:
    """Partition 0's log end; -1 before the topic exists."""
    return end_offsets(bootstrap, topic).get(0, (0, -1))[1]


def restarted_cut_back(source, topic: str, offset: int) -> None:
    os.kill(source.pid(), signal.SIGKILL)
    assert wait_until(lambda: not source.is_running(), 30)
    time.sleep(1)
    cut_back(source.home, topic, offset)
    source.start()
    assert end_offsets(source.bootstrap, topic)[0][1] == offset


def test_a_source_cut_back_below_what_was_copied_is_recorded_and_its_new_records_are_copied_once(
        spark, dc2, tmp_path):
    topic, group = unique("rewound."), unique("rw-")
    with contextlib.contextmanager(started_cluster)(tmp_path, "rw", 26592) as source:
        config = flow_config(source, dc2, tmp_path, name="rewound", topics={"include": [topic.replace(".", r"\.")]},
                             offsets={"groups": {"include": ["rw-.*"]}})
        try:
            create_topic(source.bootstrap, topic, partitions=1)
            produce(source.bootstrap, topic, ({"key": f"old{i}".encode(), "value": b"old"} for i in range(60)))
            produce(source.bootstrap, topic, ({"key": f"old{i}".encode(), "value": b"old"} for i in range(60, 100)))
            with running_flow(spark, config):
                assert wait_until(lambda: dest_end(dc2.bootstrap, topic) == 100, 120)

            restarted_cut_back(source, topic, 60)

            lines: list[str] = []
            with running_flow(spark, config, log=lines.append):
                assert wait_until(lambda: any("offsets-rewound" in x for x in lines), 120), lines[-10:]
                produce(source.bootstrap, topic, ({"key": f"new{i}".encode(), "value": b"new"} for i in range(60, 85)))
                produce(source.bootstrap, topic, ({"key": f"new{i}".encode(), "value": b"new"} for i in range(85, 90)))
                assert wait_until(lambda: dest_end(dc2.bootstrap, topic) == 130, 120), dest_end(dc2.bootstrap, topic)
                consume_and_commit(source.bootstrap, topic, group, {0: 75}, helper=False)
                assert wait_until(lambda: committed(dc2.bootstrap, group, topic, 1) == {0: 115}, 120), \
                    committed(dc2.bootstrap, group, topic, 1)
            said = [x for x in lines if x.startswith("LOSS: ")]
            assert len(said) == 1 and "40 records lost (offsets-rewound), offsets 60-99" in said[0], said
            assert [(x.first_offset, x.last_offset, x.records, x.cause, x.destination_offset)
                    for x in LossLedger(config.streaming.losses).read()] == [(0 + 60, 99, 40, "offsets-rewound", 100)]

            # cut back again while the flow is away, and written past the last copy before it is back:
            # the source record at the last copied offset is not the one copied
            restarted_cut_back(source, topic, 85)
            produce(source.bootstrap, topic, ({"key": f"again{i}".encode(), "value": b"again"} for i in range(85, 105)))
            lines.clear()
            with running_flow(spark, config, log=lines.append):
                assert wait_until(lambda: dest_end(dc2.bootstrap, topic) == 150, 120), \
                    (dest_end(dc2.bootstrap, topic), lines[-8:])
            said = [x for x in lines if x.startswith("LOSS: ")]
            assert len(said) == 1 and "5 records lost (offsets-rewound), offsets 85-89" in said[0], said

            # a restart finds nothing new and copies nothing twice
            with running_flow(spark, config):
                produce(source.bootstrap, topic, ({"key": b"later", "value": b"later"} for _ in range(5)))
                assert wait_until(lambda: dest_end(dc2.bootstrap, topic) == 155, 120)
            copies = [(provenance(r)[-1]["offset"], r.value) for r in consume_all(dc2.bootstrap, topic)]
            assert copies == [(o, b"old") for o in range(100)] + [(o, b"new") for o in range(60, 90)] + [
                (o, b"again") for o in range(85, 105)] + [(o, b"later") for o in range(105, 110)]
            assert [(x.first_offset, x.records) for x in LossLedger(config.streaming.losses).read()] == [(60, 40),
                                                                                                       (85, 5)]
        finally:
            delete_topics(dc2.bootstrap, [topic])
