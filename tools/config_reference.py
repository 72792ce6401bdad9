"""`docs/reference/config.md`, written from the flow file's key tables (`dr_stream/core/config.py`)."""

from __future__ import annotations

from pathlib import Path

from dr_stream.core.config import SECTIONS
from dr_stream.core.config_def import reference

OUT = Path(__file__).resolve().parent.parent / "docs" / "reference" / "config.md"


def render() -> str:
    return "\n".join([
        "# dr-stream flow file reference", "",
        "Generated from the key tables in `dr_stream/core/config.py` by `python -m tools.references`; a test keeps "
        "it equal to the code, and the reader is built from the same tables. Unknown keys are errors; every error "
        "is one line naming the file and the key path. How to write a flow file: "
        "[configuration](../configuration.md).", "",
        reference(SECTIONS),
    ])
