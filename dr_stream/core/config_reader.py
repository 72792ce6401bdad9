"""Walking a flow file's raw YAML: each value checked for its type, each error one line naming
the file and the key path, `${env:NAME}` substituted in every string."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Set
from typing import Any, TypeVar, overload

ENV = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|milliseconds?|seconds?|minutes?|hours?|days?)\s*$")

T = TypeVar("T")


class ConfigError(ValueError):
    """One line: `<file>: <key.path>: <what is wrong>`."""


def duration_parts(duration: str) -> tuple[str, str]:
    """(number, unit) of a duration already matched by DURATION."""
    matched = DURATION.match(duration)
    if matched is None:
        raise ValueError(f"{duration!r} is not a duration like 500ms, 1s or 1m")
    number, unit = matched.groups()
    return number, unit


def milliseconds(duration: str) -> int:
    """A duration already matched by DURATION, in ms."""
    number, unit = duration_parts(duration)
    scale = (1 if unit == "ms" or unit.startswith("milli") else 1000 if unit.startswith("s")
             else 3_600_000 if unit.startswith("h") else 86_400_000 if unit.startswith("d") else 60_000)
    return int(float(number) * scale)


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


class YamlReader:
    """Walks the raw YAML, checking keys and types, and keeps the file name for errors."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.path}: {key}: {message}")

    def mapping(self, value: Any, key: str, allowed: set[str], required: Set[str] = frozenset()) -> dict:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise self.fail(key or "<top>", f"expected a mapping, got {type(value).__name__}")
        for k in value:
            if k not in allowed:
                raise self.fail(_join(key, str(k)), f"unknown key (allowed: {', '.join(sorted(allowed))})")
        for k in sorted(required):
            if value.get(k) in (None, ""):
                raise self.fail(_join(key, k), "is required")
        return value

    def expand(self, value: str, key: str) -> str:
        def lookup(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise self.fail(key, f"environment variable {name} is not set")
            return os.environ[name]

        return ENV.sub(lookup, value)

    def string(self, raw: dict, name: str, key: str, default: str | None = None) -> str:
        value = raw.get(name, default)
        if not isinstance(value, str) or value == "":
            raise self.fail(_join(key, name), f"expected a non-empty string, got {value!r}")
        return self.expand(value, _join(key, name))

    def boolean(self, raw: dict, name: str, key: str, default: bool) -> bool:
        value = raw.get(name, default)
        if not isinstance(value, bool):
            raise self.fail(_join(key, name), f"expected true or false, got {value!r}")
        return value

    @overload
    def integer(self, raw: dict, name: str, key: str, default: int, minimum: int) -> int: ...

    @overload
    def integer(self, raw: dict, name: str, key: str, default: None, minimum: int) -> int | None: ...

    def integer(self, raw: dict, name: str, key: str, default: int | None, minimum: int) -> int | None:
        value = raw.get(name, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(_join(key, name), f"expected an integer >= {minimum}, got {value!r}")
        return value

    def regexes(self, raw: dict, name: str, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = raw.get(name, list(default))
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(_join(key, name), "expected a list of regex strings")
        out = []
        for i, pattern in enumerate(value):
            where = f"{key}.{name}[{i}]"
            out.append(self.regex(self.expand(pattern, where), where, shown=pattern))
        return tuple(out)

    def regex(self, pattern: str, where: str, shown: str | None = None) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise self.fail(where, f"invalid regex {shown or pattern!r}: {exc}") from None
        return pattern

    def each(self, raw: dict, name: str, key: str, parse: Callable[[Any, str], T]) -> tuple[T, ...]:
        value = raw.get(name) or []
        if not isinstance(value, list):
            raise self.fail(_join(key, name), "expected a list")
        return tuple(parse(item, f"{key}.{name}[{i}]") for i, item in enumerate(value))


    def duration_s(self, raw: dict, name: str, key: str, default: str) -> float:
        """A duration like 500ms, 5s or 1m, in seconds."""
        value = self.string(raw, name, key, default=default)
        if not DURATION.match(value):
            raise self.fail(_join(key, name), f"{value!r} is not a duration like 500ms, 1s or 1m")
        return milliseconds(value) / 1000
