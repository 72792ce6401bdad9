"""An error a command did not handle is one line (what failed, where, what to do) and an exit
code from the enum; its traceback goes to a file the line names, never to the console."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import KafkaError, KafkaException

from dr_stream.exit_codes import ExitCode
from dr_stream.kafka.retrying_clients import note_where
from dr_stream.operations.command_failure import describe, report


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_a_cluster_that_did_not_settle_is_unreachable_and_named_with_its_call():
    exc = note_where(KafkaException(KafkaError(KafkaError.UNKNOWN_LEADER_EPOCH, "Leader epoch is newer than broker "
                                                                                "epoch")), "dc1", "list offsets")
    found = describe("failback", exc)
    assert found.code is ExitCode.UNREACHABLE
    assert found.line.startswith("dr-stream: failback: Leader epoch is newer than broker epoch [UNKNOWN_LEADER_EPOCH] "
                                 "(cluster dc1, list offsets); the cluster did not answer")
    assert "\n" not in found.line


def test_a_cluster_named_on_an_earlier_error_in_the_chain_is_still_named():
    try:
        try:
            raise note_where(KafkaException(KafkaError(KafkaError._TIMED_OUT)), "dc2", "describe groups")
        except KafkaException as inner:
            raise RuntimeError("the translation could not read its groups") from inner
    except RuntimeError as outer:
        found = describe("failover", outer)
    assert found.code is ExitCode.UNREACHABLE
    assert "the translation could not read its groups (cluster dc2, describe groups)" in found.line


def test_any_other_error_is_failed_in_one_line_with_what_to_do():
    found = describe("status", _raised(ValueError("first line\n  second line")))
    assert found.code is ExitCode.FAILED
    assert found.line.startswith("dr-stream: status: first line; the command stopped there: run it again")
    assert "\n" not in found.line


def test_the_traceback_goes_to_a_file_the_line_names():
    found = report("drill", _raised(RuntimeError("boom")))
    path = Path(found.line.rsplit("(traceback: ", 1)[1].rstrip(")"))
    try:
        text = path.read_text()
        assert "Traceback (most recent call last)" in text and "RuntimeError: boom" in text
    finally:
        path.unlink()
