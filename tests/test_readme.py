"""The README's code agrees with the code: each `from dr_stream... import` it shows imports."""

from __future__ import annotations

import importlib
import re

from dr_stream.runtime.paths import project_root


def test_every_import_the_readme_shows_names_a_module_and_a_name_that_exist():
    readme = (project_root() / "README.md").read_text()
    shown = re.findall(r"^from (dr_stream[\w.]*) import ([\w, ]+)$", readme, re.MULTILINE)
    assert shown, "the README shows how to import its helpers"
    missing = [f"{module}.{name.strip()}" for module, names in shown for name in names.split(",")
               if not hasattr(importlib.import_module(module), name.strip())]
    assert missing == []
