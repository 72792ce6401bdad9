"""`python -m tools.references`: writes every generated reference under `docs/reference/`.

Each reference is rendered from the code it describes (the CLI's parser, the flow file's key
tables, the metric families); `tests/test_docs.py` keeps the committed files equal to what this writes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from tools import cli_reference, config_reference, metrics_reference

REFERENCES: dict[Path, Callable[[], str]] = {
    cli_reference.OUT: cli_reference.render,
    config_reference.OUT: config_reference.render,
    metrics_reference.OUT: metrics_reference.render,
}


def main() -> int:
    for out, render in REFERENCES.items():
        out.parent.mkdir(parents=True, exist_ok=True)
        text = render()
        out.write_text(text)
        print(f"{out}: {len(text.splitlines())} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
