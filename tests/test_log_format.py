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
