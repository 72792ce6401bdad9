"""`python -m tools.module_sizes [PACKAGE]`: modules and functions long enough to look at twice.

Size is a smell, not a rule: a long module may be one concept that reads best in one place, and
splitting it only to stay under a number scatters that concept. So `make lint` prints what is
over the marks below as a warning and never fails on it; a reviewer decides whether the module
holds more than one concept.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

MODULE_LINES = 400
FUNCTION_LINES = 60


@dataclass(frozen=True)
class Long:
    where: str  # `path` or `path:function`
    lines: int
    mark: int

    def shown(self) -> str:
        return f"warning: {self.where} is {self.lines} lines (look at it twice past {self.mark})"


def long_parts(package: Path) -> list[Long]:
    """Every module over `MODULE_LINES` and function over `FUNCTION_LINES` under `package`."""
    found = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text()
        where = str(path.relative_to(package.parent))
        if (lines := len(text.splitlines())) > MODULE_LINES:
            found.append(Long(where, lines, MODULE_LINES))
        for node in ast.walk(ast.parse(text, where)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES:
                    found.append(Long(f"{where}:{node.name}", length, FUNCTION_LINES))
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    for part in long_parts(Path(args[0] if args else "dr_stream").resolve()):
        print(part.shown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
