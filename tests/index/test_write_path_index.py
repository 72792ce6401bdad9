"""The offset index fed by the write path: exact from the first sync, after crashes, without a JVM.

An unmodified consumer commits on dc1 while the flow is still copying; a watcher polls the
same group on dc2 from that moment on. Whatever lag the group has (at the head, 1k, 10k, 100k
behind), the first offset dc2 ever shows must be the exact one, and a consumer resuming there
re-reads nothing and skips nothing. dc2 already holds 500 records of its own in each topic,
so the clusters' offsets differ.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition

from dr_stream.background import Background
from dr_stream.core.config import ClusterConfig
from dr_stream.index.run_store import RunStore
from dr_stream.index.runs_topic import RunsReader
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.kafka.group_offsets.consumer_groups import read_committed
from dr_stream.operations.failover import translate_positions
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.runtime.paths import project_root
from tests.flows import flow_config, flow_file, running_flow
from tests.kafka_tools import (
    admin,
    consume_all,
    count,
    create_on_both,
    create_topic,
    delete_topics,
    produce,
    provenance,
    resume_as_group,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration
LOCAL = 500


def records(n: int, start: int = 0):
    return ({"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": 0} for i in range(start, start + n))


def commit_at(bootstrap: str, group: str, topic: str, offset: int) -> None:
    """Commits as an unmodified application would (the poller picks it up)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


class GroupWatch:
    """Polls a group's committed offset on a cluster and keeps every distinct value, with when it
    appeared. A coordinator that is moving or loading is waited out (`read_committed`); any other
    failure of the watch fails the test that reads `seen`, with its message."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self._seen: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._cluster = ClusterConfig("watched", bootstrap)
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        self._group, self._partition = group, (topic, 0)
        self._thread = Background(f"watch of group {group}", self._watch).start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            found = read_committed(self._consumer, self._cluster, self._group, [self._partition])
            offset = found[self._partition].offset if self._partition in found else -1
            if offset >= 0 and (not self._seen or self._seen[-1][1] != offset):
                self._seen.append((time.monotonic(), offset))
            self._stop.wait(0.02)

    @property
    def seen(self) -> list[tuple[float, int]]:
        self._thread.check()
        return list(self._seen)

    def stop(self) -> list[tuple[float, int]]:
        """Ends the watch and closes its consumer (a second call only returns what was seen)."""
        if not self._stop.is_set():
            self._stop.set()
            try:
                self._thread.join(timeout=30)
            finally:
                self._consumer.close()
        return self.seen

    def __enter__(self) -> GroupWatch:
        return self

    def __exit__(self, *_: object) -> None:
        # A failed assertion must not leave the consumer polling a cluster the session later stops.
        self.stop()


def origins_resumed(bootstrap: str, topic: str, group: str, source_id: str) -> list[int]:
    return [p[-1]["offset"] for r in resume_as_group(bootstrap, topic, group, 1)
            if (p := provenance(r)) and p[-1]["cluster"] == source_id]


def dest_offset_of(bootstrap: str, topic: str, origin: int, source_id: str) -> int | None:
    for r in consume_all(bootstrap, topic):
        p = provenance(r)
        if p and p[-1]["cluster"] == source_id and p[-1]["offset"] == origin:
            return r.offset
    return None


@pytest.fixture(scope="module")
def flows(spark, dc1, dc2, tmp_path_factory):
    """dc1 -> dc2 on `w13.ap.*`; dc1 <-> dc2 on `w13.aa.*` (two flows, identical topic names)."""
    work = tmp_path_factory.mktemp("w13")
    groups = {"groups": {"include": ["w13-.*"]}}
    ap = flow_config(dc1, dc2, work / "ap", name="w13-ap", topics={"include": [r"w13\.ap\..*"]}, offsets=groups)
    there = flow_config(dc1, dc2, work / "aa", name="w13-aa-there", topics={"include": [r"w13\.aa\..*"]},
                        offsets=groups)
    back = flow_config(dc2, dc1, work / "aa", name="w13-aa-back", topics={"include": [r"w13\.aa\..*"]},
                       offsets=groups)
    with running_flow(spark, ap) as a, running_flow(spark, there) as t, running_flow(spark, back) as b:
        yield {"ap": a, "aa": t, "back": b}
    for cluster in (dc1, dc2):
        names = [n for n in admin(cluster.bootstrap).list_topics(timeout=10).topics if n.startswith("w13.")]
        delete_topics(cluster.bootstrap, names)


BEHIND = [0, 1_000, 10_000, 100_000]


@pytest.mark.parametrize("behind", BEHIND, ids=lambda b: "head" if b == 0 else f"{b}-behind")
@pytest.mark.parametrize("mode", ["ap", "aa"])
def test_the_first_offset_the_destination_group_shows_is_the_exact_one(flows, dc1, dc2, mode, behind):
    flow = flows[mode]
    topic, group = unique(f"w13.{mode}."), unique("w13-")
    create_on_both(dc1.bootstrap, dc2.bootstrap, topic, partitions=1)
    produce(dc2.bootstrap, topic, ({"key": b"local", "value": b"dc2", "partition": 0} for _ in range(LOCAL)))
    if mode == "aa":  # dc2's own records reach dc1 first, so dc1 holds copies the flow must not copy back
        assert wait_until(lambda: count(dc1.bootstrap, topic) >= LOCAL, 120)
    total = behind + 10_000
    produce(dc1.bootstrap, topic, records(total))
    end = count(dc1.bootstrap, topic)
    committed_at = end - behind
    with GroupWatch(dc2.bootstrap, group, topic) as watch:
        t0 = time.monotonic()
        commit_at(dc1.bootstrap, group, topic, committed_at)

        source_id = flow.source_cluster_id
        # dc2 ends up with its own records and a copy of each of dc1's own: counted from the log ends
        # first, since looking a copy up reads the whole topic
        assert wait_until(lambda: count(dc2.bootstrap, topic) >= LOCAL + total, 180)
        assert wait_until(lambda: dest_offset_of(dc2.bootstrap, topic, end - 1, source_id) is not None, 30)
        if behind:
            expected = dest_offset_of(dc2.bootstrap, topic, committed_at, source_id)
        else:  # just after the last copy (aa: dc1's first 500 are dc2's own records, not copied back)
            expected = LOCAL + end if mode == "ap" else end
        assert wait_until(lambda: watch.seen and (expected is None or watch.seen[-1][1] == expected), 60), (
            f"dc2 group never reached {expected}: {watch.seen}")
        time.sleep(3)  # anything synced after the exact offset would show up here
        seen = watch.stop()
    first_at, first = seen[0]
    print(f"{mode} {behind} behind: first synced offset {first} after {first_at - t0:.2f} s; all {seen}")
    if expected is not None:
        assert first == expected, f"first synced {first}, exact {expected} (all seen: {seen})"
    assert len({v for _, v in seen}) == 1, f"the group moved after its first sync: {seen}"

    # failover: more records arrive, then a consumer resumes on dc2 where the group stands
    produce(dc1.bootstrap, topic, records(100, start=total))
    assert wait_until(lambda: count(dc2.bootstrap, topic) >= LOCAL + total + 100, 120)
    assert wait_until(lambda: dest_offset_of(dc2.bootstrap, topic, end + 99, source_id) is not None, 30)
    resumed = origins_resumed(dc2.bootstrap, topic, group, source_id)
    # the records produced on dc1 itself (copies from dc2 carry provenance and are never copied back)
    dc1_local = {r.offset for r in consume_all(dc1.bootstrap, topic) if not provenance(r)}
    reread = sum(1 for o in resumed if o < committed_at) + len(resumed) - len(set(resumed))
    skipped = len({o for o in dc1_local if o >= committed_at} - set(resumed))
    assert (reread, skipped) == (0, 0), f"re-read {reread}, skipped {skipped}"


def test_local_records_between_copies_on_the_destination_translate_exactly(flows, dc1, dc2):
    flow = flows["ap"]
    topic, group = unique("w13.ap.mix."), unique("w13-mix-")
    create_on_both(dc1.bootstrap, dc2.bootstrap, topic, partitions=1)
    for chunk in range(5):  # copies and dc2's own records alternate in the destination partition
        produce(dc1.bootstrap, topic, records(200, start=chunk * 200))
        produce(dc2.bootstrap, topic, ({"key": b"local", "value": b"x", "partition": 0} for _ in range(37)))
        time.sleep(0.7)
    source_id = flow.source_cluster_id
    assert wait_until(lambda: dest_offset_of(dc2.bootstrap, topic, 999, source_id) is not None, 120)
    where = {p[-1]["offset"]: r.offset for r in consume_all(dc2.bootstrap, topic)
             if (p := provenance(r)) and p[-1]["cluster"] == source_id}
    assert len(where) == 1000
    time.sleep(3)  # runs of the last batch reach the table
    commit_at(dc1.bootstrap, group, topic, 0)
    for committed_at in (0, 1, 199, 200, 437, 600, 999):
        commit_at(dc1.bootstrap, group, topic, committed_at)
        rows = translate_positions(flow.config, FlowTables.of(flow.config), group).rows
        got = next(p.translation for p in rows if p.translation.group == group)
        assert (got.offset, got.method) == (where[committed_at], "exact"), committed_at


def _start_cli(args: list[str], log: Path) -> subprocess.Popen:
    out = open(log, "ab")
    return subprocess.Popen([sys.executable, "-m", "dr_stream.cli", *args], stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=project_root())


def _children(pid: int) -> list[str]:
    """Command lines of the processes whose parent is `pid`."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, ValueError, IndexError):
            continue
    return out


def test_failover_with_the_source_gone_starts_no_jvm_and_commits_the_exact_offset(flows, dc1, dc2, tmp_path):
    flow = flows["ap"]
    topic, group = unique("w13.ap.gone."), unique("w13-gone-")
    create_on_both(dc1.bootstrap, dc2.bootstrap, topic, partitions=1)
    produce(dc2.bootstrap, topic, ({"key": b"local", "value": b"dc2", "partition": 0} for _ in range(LOCAL)))
    produce(dc1.bootstrap, topic, records(3000))
    commit_at(dc1.bootstrap, group, topic, 2100)
    source_id = flow.source_cluster_id
    assert wait_until(lambda: dest_offset_of(dc2.bootstrap, topic, 2999, source_id) is not None, 120)
    assert wait_until(lambda: any(c.group == group for c in FlowTables.of(flow.config).translations.last_commits()), 60)

    config = yaml.safe_load(Path(flow_file(flow.config, tmp_path)).read_text())
    config["source"]["bootstrap_servers"] = "127.0.0.1:1"  # the source datacenter is gone
    config["offsets"] = {"groups": {"include": ["w13-.*"]}}
    config["topics"] = {"include": [r"w13\.ap\..*"]}
    path = tmp_path / "gone.yaml"
    path.write_text(yaml.safe_dump(config))
    log = tmp_path / "failover.log"
    started = time.monotonic()
    proc = _start_cli(["failover", "--config", str(path), "--group", group, "--json"], log)
    javas = []
    while proc.poll() is None:
        javas += [c for c in _children(proc.pid) if "java" in c]
        time.sleep(0.01)
    wall = time.monotonic() - started
    print(f"failover with the source gone: {wall:.2f} s wall\n{log.read_text()}")
    assert proc.returncode == 0, log.read_text()
    assert javas == [], javas
    text = log.read_text()
    result = json.loads(text[text.index("{"):])
    assert [(p["method"], p["source_offset"]) for p in result["positions"]] == [("exact", 2100)], text
    expected = dest_offset_of(dc2.bootstrap, topic, 2100, source_id)
    consumer = Consumer({"bootstrap.servers": dc2.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        assert consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == expected
    finally:
        consumer.close()


def test_kill_9_between_a_write_and_its_run_publication_then_restart_indexes_every_copy_once(dc1, dc2, tmp_path):
    topic = unique("w13.kill.")
    create_topic(dc1.bootstrap, topic, partitions=2)
    create_topic(dc2.bootstrap, topic, partitions=2)
    produce(dc1.bootstrap, topic, ({"value": f"{i}".encode(), "partition": i % 2} for i in range(6000)))
    config = {
        "name": "w13-kill",
        "source": {"alias": "dc1", "bootstrap_servers": dc1.bootstrap},
        # Runs are held 120 s at the end of each task: the kill lands between write and publication.
        "destination": {"alias": "dc2", "bootstrap_servers": dc2.bootstrap,
                        "kafka": {"dr.stream.runs.hold.ms": "120000"}},
        "topics": {"include": [topic]},
        "streaming": {"checkpoint_dir": str(tmp_path / "cp"), "offset_index": str(tmp_path / "index"),
                      "trigger": "500ms"},
    }
    path = tmp_path / "flow.yaml"
    path.write_text(yaml.safe_dump(config))
    log = tmp_path / "run.log"
    procs = []
    try:
        proc = _start_cli(["run", "--config", str(path)], log)
        procs.append(proc)
        assert wait_until(lambda: count(dc2.bootstrap, topic) >= 6000, 180), log.read_text()[-3000:]
        reader = RunsReader(ClusterContext(ClusterConfig("dc2", dc2.bootstrap, {})), "__dr_stream_runs.w13-kill")
        try:
            published = [r for _, r in reader.read_to_end().runs if r.origin_topic == topic]
        finally:
            reader.close()
        assert published == [], "the runs were published before the kill: the window was missed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

        del config["destination"]["kafka"]
        path.write_text(yaml.safe_dump(config))
        proc = _start_cli(["run", "--config", str(path)], log)
        procs.append(proc)
        def indexed() -> list:  # a new reader each time: one FlowTables reads one snapshot
            return [r for r in FlowTables.at(str(tmp_path / "index"), str(tmp_path / "translations")).index.runs()
                    if r.origin_topic == topic]

        assert wait_until(lambda: sum(r.records for r in RunStore(indexed())) >= 6000, 180), log.read_text()[-3000:]
        time.sleep(3)
        store = RunStore(indexed())
        for p in (0, 1):
            assert [(r.origin_start, r.origin_end, r.dest_start, r.dest_end)
                    for r in store.runs_of((topic, p, topic, p))] == [(0, 2999, 0, 2999)]
        assert count(dc2.bootstrap, topic) == 6000, "a record was copied twice"
        assert "had no published run" in log.read_text()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        for running in procs:
            if running.poll() is None:
                os.killpg(running.pid, signal.SIGKILL)
                running.wait(timeout=30)
        delete_topics(dc1.bootstrap, [topic])
        delete_topics(dc2.bootstrap, [topic, "__dr_stream_runs.w13-kill"])
