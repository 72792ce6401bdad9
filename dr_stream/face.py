"""A wing's face: the names other wings may import from its package, resolved at first use.

A package's `__init__` that imported every module it shows would import all of the wing (Spark
with it) for any one name; a command that reads a table would pay for the whole runtime.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def resolver(package: str, face: Mapping[str, tuple[str, str]]) -> Callable[[str], object]:
    """The package's module `__getattr__`: face name -> (module in the package, its name there)."""

    def resolve(name: str) -> object:
        if name not in face:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = face[name]
        return getattr(importlib.import_module(f"{package}.{module}"), attribute)

    return resolve
