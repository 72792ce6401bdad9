"""A retrying loop says each failure once and its end once (pure)."""

from dr_stream.failure_notes import FailureNotes, first_line


def notes():
    lines: list[str] = []
    return FailureNotes(lines.append, lambda s, cause: f"{s}: failing: {cause}", lambda s: f"{s}: ok again"), lines


def test_a_failure_repeated_every_round_is_said_once():
    failures, lines = notes()
    for _ in range(5):
        failures.round({"app": "COORDINATOR_NOT_AVAILABLE\nstack"}, ["app", "other"])
    assert lines == ["app: failing: COORDINATOR_NOT_AVAILABLE"]
    assert failures.subjects == {"app"}


def test_a_new_cause_is_said_and_the_end_of_the_failure_too():
    failures, lines = notes()
    failures.round({"app": "timed out"}, ["app"])
    failures.round({"app": "not authorized"}, ["app"])
    failures.round({}, ["app"])
    failures.round({}, ["app"])
    assert lines == ["app: failing: timed out", "app: failing: not authorized", "app: ok again"]
    assert failures.subjects == set()


def test_recovery_needs_an_attempt_at_the_subject():
    failures, lines = notes()
    failures.round({"app": "timed out"}, ["app"])
    failures.round({}, ["other"])  # `app` was not tried this round: still failing
    assert lines == ["app: failing: timed out"]
    assert failures.subjects == {"app"}


def test_a_failure_without_a_message_is_named_by_its_type():
    assert first_line(TimeoutError()) == "TimeoutError"
    assert first_line(RuntimeError("\n  \nbroker down\n\tat ...")) == "broker down"
    assert first_line("") == "unknown cause"


def test_thousands_of_subjects_failing_alike_in_one_round_are_one_line_and_so_is_their_recovery():
    failures, lines = notes()
    groups = [f"g{i:04d}" for i in range(600)]
    failures.round({**dict.fromkeys(groups, "TimeoutException: waiting to send"), "solo": "not authorized"},
                   [*groups, "solo"])
    assert lines == ["g0000 and 599 more: failing: TimeoutException: waiting to send", "solo: failing: not authorized"]
    failures.round({}, [*groups[:2], "solo"])  # a few recover: each said
    failures.round({}, groups)
    assert lines[2:] == ["g0000: ok again", "g0001: ok again", "solo: ok again", "g0002 and 597 more: ok again"]
    assert failures.subjects == set()
