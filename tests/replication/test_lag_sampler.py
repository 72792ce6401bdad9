"""What a lag sample costs and when the sampler gives up on its producer: the rules alone, a sample
between full ones that asks no cluster anything, then a healthy sampler on real clusters that must
never give up."""

import threading
import time

import pytest

from dr_stream.core.config import parse_flow
from dr_stream.core.contracts import lag_topic
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.replication.flow_metrics import FlowMetrics
from dr_stream.replication.lag_history import read_samples
from dr_stream.replication.lag_sampler import LagSampler, StuckQueue, moved_bounds
from tests.flows import flow_config
from tests.kafka_tools import unique


def test_between_full_samples_the_bounds_move_to_the_ends_batches_saw_and_never_back():
    bounds = {("t", 0): (10, 100), ("t", 1): (0, 50)}
    assert moved_bounds(bounds, {("t", 0): 130, ("t", 1): 40, ("t", 2): 9}) == {("t", 0): (10, 130), ("t", 1): (0, 50)}


class Unasked:
    """A cluster, timestamps reader or metrics that fails the test when anything is asked of it."""

    def __init__(self, what: str, allowed: dict | None = None) -> None:
        self._what, self._allowed = what, allowed or {}

    def __getattr__(self, name: str):
        if name in self._allowed:
            return self._allowed[name]
        raise AssertionError(f"{self._what}.{name} asked between full samples")


def test_a_sample_between_full_ones_asks_neither_cluster_and_reads_only_the_ages_that_changed():
    config = parse_flow({"name": "between", "source": {"alias": "dc1", "bootstrap_servers": "dc1:9092"},
                         "destination": {"alias": "dc2", "bootstrap_servers": "dc2:9092"}}, "<test>")
    read: list[dict] = []
    stamps = Unasked("timestamps", {"of_records": lambda wanted, timeout: read.append(dict(wanted)) or {
        key: 1_000 for key in wanted}})
    next_offsets = {("t", 0): 100, ("t", 1): 50}
    sampler = LagSampler(config, Unasked("source"), Unasked("destination"), lambda: dict(next_offsets),
                         FlowMetrics(config.name, "replicate"))
    sampler._bounds = {("t", 0): (0, 100), ("t", 1): (0, 50)}
    sampler.batch_read({("t", 0): 130, ("t", 1): 50})
    lags = {(lag.topic, lag.partition): lag.lag_records for lag in sampler.sample_moved(stamps)}
    assert lags == {("t", 0): 30, ("t", 1): 0}
    assert read == [{("t", 0): 100}]
    next_offsets[("t", 0)] = 110  # the next batch copied ten more; the oldest waiting record changed
    sampler.batch_read({("t", 0): 130})
    assert [lag.lag_records for lag in sampler.sample_moved(stamps)] == [20, 0]
    assert read[-1] == {("t", 0): 110}
    sampler.batch_read({("t", 0): 130})
    sampler.sample_moved(stamps)
    assert len(read) == 2, "an age already read is not read again"


def test_a_queue_that_never_empties_while_the_destination_answers_is_stuck_after_the_limit():
    queue = StuckQueue(limit_s=20)
    assert [queue.stuck(1, True, t) for t in (0, 10, 19.9)] == [False, False, False]
    assert queue.stuck(2, True, 20)
    assert not queue.stuck(2, True, 21)  # the clock starts again for the new producer


def test_a_queue_that_empties_between_rounds_is_never_stuck():
    queue = StuckQueue(limit_s=20)
    assert not any(queue.stuck(n, True, t) for t, n in zip(range(0, 100, 5), [1, 0] * 10, strict=True))


def test_the_time_the_destination_is_away_does_not_count():
    queue = StuckQueue(limit_s=20)
    assert not queue.stuck(3, True, 0)
    assert not queue.stuck(5, False, 15)  # away: the samples wait, as they should
    assert not queue.stuck(5, True, 30)  # back: the reconnect gets its own 20 s
    assert not queue.stuck(5, True, 49)
    assert queue.stuck(5, True, 50)


@pytest.mark.integration
def test_a_healthy_producer_is_never_taken_for_a_stuck_one_and_every_sample_lands(dc1, dc2, tmp_path, topics):
    """Delivered samples' reports are counted by the producer until served: the sampler serves them
    before it asks whether anything is still queued, or a working producer would be replaced."""
    config = flow_config(dc1, dc2, tmp_path, name=unique("sampler-"), topics={"include": ["none-such"]},
                         metrics={"sample_interval": "1s"})
    topics.append(lag_topic(config.name))
    lines: list[str] = []
    source, destination = ClusterContext(config.source), ClusterContext(config.destination)
    sampler = LagSampler(config, source, destination, dict, FlowMetrics(config.name, "replicate"), log=lines.append,
                         stuck_after_s=2.0)
    sampler.prepare()
    stop = threading.Event()
    thread = threading.Thread(target=sampler.run, args=(stop,))
    thread.start()
    time.sleep(7)
    stop.set()
    thread.join(30)
    assert lines == [], lines
    assert len(read_samples(destination, config.name, 0)) >= 4
    source.close()
    destination.close()
