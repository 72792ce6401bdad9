"""dr-stream's own lines as text or JSON (pure: Python logging only)."""

from __future__ import annotations

import json
import logging

from dr_stream import log_format


def test_a_flow_line_reads_as_before_in_text_and_as_one_object_in_json(capsys):
    try:
        log_format.configure("text")
        log_format.flow_logger("f1").info("batch 3: 10 read")
        logging.getLogger("dr_stream.kafka.dc1").warning("dc1: broker down")
        logging.getLogger("dr_stream.kafka.dc1").info("dc1: chatter")  # below WARNING: not shown
        assert capsys.readouterr().out.splitlines() == ["[f1] batch 3: 10 read",
                                                         "WARNING dr_stream.kafka.dc1: dc1: broker down"]
        log_format.configure("json")
        log_format.configure("json")  # configuring again never doubles a line
        log_format.flow_logger("f1").info("stopped")
        lines = capsys.readouterr().out.splitlines()
        assert len(lines) == 1
        line = json.loads(lines[0])
        assert (line["level"], line["logger"], line["flow"], line["message"]) == (
            "INFO", "dr_stream.flow.f1", "f1", "stopped")
        assert line["time"].endswith("+00:00")
    finally:
        log_format.configure("text")


def _record(error: BaseException | None) -> logging.LogRecord:
    exc_info = (type(error), error, None) if error else None
    return logging.LogRecord("root", logging.ERROR, "py4j/java_gateway.py", 1, "Exception while sending command.",
                             None, exc_info)


def test_py4j_reports_of_a_jvm_that_went_away_are_dropped_and_any_other_error_is_kept():
    from py4j.protocol import Py4JError, Py4JNetworkError

    gone = log_format.JvmGone()
    assert not gone.filter(_record(Py4JNetworkError("Answer from Java side is empty")))
    reset = Py4JNetworkError("Error while sending or receiving")
    reset.__context__ = ConnectionResetError(104, "Connection reset by peer")
    assert not gone.filter(_record(reset))
    wrapped = RuntimeError("listener failed")
    wrapped.__cause__ = ConnectionRefusedError(111, "Connection refused")
    assert not gone.filter(_record(wrapped))
    assert gone.filter(_record(ValueError("a bug of ours")))
    assert gone.filter(_record(Py4JError("An error occurred while calling o81.stop")))
    assert gone.filter(_record(None))
