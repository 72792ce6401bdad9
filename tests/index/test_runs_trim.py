"""What the flow deletes from its runs topic: only what its offset index table held `after_s`
ago, each position once; a refused DELETE is said once and trimming stops, other failures are
tried again."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from dr_stream.index.runs_topic import RunsTrim
from dr_stream.kafka.authorization import not_authorized


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _trim(fail: list[Exception] | None = None) -> tuple[RunsTrim, Clock, list[int], list[str]]:
    clock, deleted, said = Clock(), [], []

    def delete_through(through: int) -> int:
        if fail:
            raise fail.pop(0)
        deleted.append(through)
        return through + 1

    return RunsTrim(delete_through, said.append, "runs on dc2", after_s=600.0, clock=clock), clock, deleted, said


def test_only_what_the_table_held_after_s_ago_is_deleted():
    trim, clock, deleted, _ = _trim()
    trim.appended(100)
    clock.now = 300.0
    trim.appended(250)
    trim.trim()
    assert deleted == [], "nothing was held for 600 s yet"

    clock.now = 700.0
    trim.trim()
    assert deleted == [100], "250 was appended only 400 s ago"

    clock.now = 900.0
    trim.trim()
    trim.trim()
    assert deleted == [100, 250]


def test_a_position_the_table_went_back_to_is_never_deleted_again_or_past():
    trim, clock, deleted, _ = _trim()
    trim.appended(100)
    trim.appended(40)  # a table read again from an older snapshot: not a new mark
    clock.now = 601.0
    trim.trim()
    assert deleted == [100]
    trim.appended(100)
    clock.now = 1300.0
    trim.trim()
    assert deleted == [100]


def test_a_refused_delete_is_said_once_and_trimming_stops():
    denied = not_authorized("dc2", {"security.protocol": "SASL_SSL", "sasl.jaas.config": 'x required username="drs";'},
                            "DELETE", "TOPIC __dr_stream_runs.f", "deleting the runs the offset index holds")
    trim, clock, deleted, said = _trim([denied])
    trim.appended(100)
    clock.now = 601.0
    trim.trim()
    trim.appended(200)
    clock.now = 1300.0
    trim.trim()
    assert deleted == [] and trim.refused
    assert said == [f"{denied}; compaction and a day's retention bound the topic instead"]
    assert said[0].startswith("dc2: User:drs may not DELETE TOPIC __dr_stream_runs.f")


def test_a_failed_delete_is_said_and_tried_again_at_the_next_upkeep():
    trim, clock, deleted, said = _trim([KafkaException(KafkaError(KafkaError._TIMED_OUT))])
    trim.appended(100)
    clock.now = 601.0
    trim.trim()
    assert deleted == [] and "not trimmed through offset 100" in said[0]
    trim.trim()
    assert deleted == [100], "tried again with no new append"
    trim.appended(150)
    clock.now = 1300.0
    trim.trim()
    assert deleted == [100, 150]
