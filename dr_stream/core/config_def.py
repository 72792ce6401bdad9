"""Config keys declared once: each key's name, type, default, rule and one-line doc.

A section of the flow file is a `Section`: a table of `Key`s and the rules that span keys. The
reader (`Section.read`) and the reference page (`docs/reference/config.md`, written by
`tools.references`) both come from these tables, so a default or a rule is written in one
place, and what the page says is what the reader does.

Every duration is written as text (`500ms`, `5s`, `1m`, `1h`, `7d`) and read as float seconds,
held in a field whose name ends in `_s`.

Invariants: unknown keys are errors; every error is one `ConfigError` line naming the file and
the key path; `${env:NAME}` is substituted in every string value, and errors quote the text as
written in the file, so a secret from the environment is never printed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

ENV = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|milliseconds?|seconds?|minutes?|hours?|days?)\s*$")


class ConfigError(ValueError):
    """One line: `<file>: <key.path>: <what is wrong>`."""


def milliseconds(duration: str) -> int:
    """A duration (`500ms`, `2 seconds`, `1m`, `7d`) in ms; ValueError when it is not one."""
    matched = DURATION.match(duration)
    if matched is None:
        raise ValueError(f"{duration!r} is not a duration like 500ms, 1s or 1m")
    number, unit = matched.groups()
    scale = (1 if unit == "ms" or unit.startswith("milli") else 1000 if unit.startswith("s")
             else 3_600_000 if unit.startswith("h") else 86_400_000 if unit.startswith("d") else 60_000)
    return int(float(number) * scale)


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


class YamlReader:
    """Walks a flow file's raw YAML and keeps the file's name for errors."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.path}: {key}: {message}")

    def expand(self, value: str, key: str) -> str:
        def lookup(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise self.fail(key, f"environment variable {name} is not set")
            return os.environ[name]

        return ENV.sub(lookup, value)

    @staticmethod
    def shown(value: Any, text: str) -> str:
        """A value for an error line: as written when `${env:...}` expanded it, since what a
        variable holds may be a secret."""
        return repr(text) if text == value else f"{value!r} (its value not shown)"

    def text(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or value == "":
            raise self.fail(key, f"expected a non-empty string, got {value!r}")
        return self.expand(value, key)

    def regex(self, pattern: str, key: str, shown: str | None = None) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise self.fail(key, f"invalid regex {shown or pattern!r}: {exc}") from None
        return pattern


# -- kinds of value ------------------------------------------------------------------------------


class Kind(Protocol):
    """How a key's value is read from YAML, and how its type is named in the reference."""

    @property
    def type_doc(self) -> str: ...

    def read(self, r: YamlReader, value: Any, key: str, context: Mapping[str, Any]) -> Any: ...


@dataclass(frozen=True)
class Text:
    """A non-empty string; `pattern` (a full match) with `pattern_doc` saying what it allows."""

    pattern: str | None = None
    pattern_doc: str = ""
    type_doc: str = "string"

    def read(self, r: YamlReader, value: Any, key: str, context: Mapping[str, Any]) -> str:
        text = r.text(value, key)
        if self.pattern and not re.fullmatch(self.pattern, text):
            raise r.fail(key, f"{r.shown(value, text)} {self.pattern_doc}")
        return text


# A bootstrap entry: an optional security protocol prefix (Kafka's clients both accept one), a
# host (a DNS name, IPv4, or IPv6 in brackets) and a port.
_BOOTSTRAP = re.compile(r"(?:(?:PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL)://)?"
                        r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?):(?P<port>[0-9]{1,5})")


def bootstrap_problem(text: str) -> str | None:
    """What is wrong with a bootstrap list (`host:port,...`), or None. A client given a list it
    cannot parse only says so when it first connects, or dials a port that is not the one meant
    (`host:99999`): the flow file is the place to say it, once."""
    entries = [e.strip() for e in text.split(",")]
    for entry in entries:
        if not entry:
            return f"{text!r} has an empty entry; expected host:port,host:port"
        matched = _BOOTSTRAP.fullmatch(entry)
        if matched is None:
            return f"{entry!r} is not host:port (a host name or address, then a port 1-65535)"
        if not 1 <= int(matched.group("port")) <= 65535:
            return f"{entry!r}: port {int(matched.group('port'))} is not 1-65535"
    return None


@dataclass(frozen=True)
class HostPorts:
    """A Kafka bootstrap list, `host:port,...`."""

    type_doc: str = "host:port list"

    def read(self, r: YamlReader, value: Any, key: str, context: Mapping[str, Any]) -> str:
        text = r.text(value, key)
        problem = bootstrap_problem(text)
        if problem:
            # as written: a value from ${env:...} is not echoed
            raise r.fail(key, problem if text == value else f"{value!r} expands to a list that is not host:port,...")
        return text


@dataclass(frozen=True)
class Regex:
    """One regex, `${env:...}`-expanded and compiled once to check it."""

    type_doc: str = "regex"

    def read(self, r: YamlReader, value: Any, key: str, context: Mapping[str, Any]) -> str:
        return r.regex(r.text(value, key), key, shown=value if isinstance(value, str) else None)


@dataclass(frozen=True)
class Flag:
    type_doc: str = "boolean"

    def read(self, r: YamlReader, value: Any, key: str, context: Mapping[str, Any]) -> bool:
        if not isinstance(value, bool):
            raise r.fail(key, f"expected true or false, got {value!r}")
        return value


@dataclass(frozen=True)
class Count:
    minimum: int = 0

    @property
    def type_doc(self) -> str:
        return f"integer >= {self.minimum}"

    def read(self, r: YamlReader, value: Any, key: str, context: Mapping[str, Any]) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < self.minimum:
            raise r.fail(key, f"expected an integer >= {self.minimum}, got {value!r}")
        return value


@dataclass(frozen=True)
class Period:
    """A duration, read as float seconds; at least `minimum_s` (with `why`, said when it is not)."""

    minimum_s: float = 0.0
    why: str = ""

    @property
    def type_doc(self) -> str:
        least = f", at least {self.minimum_s:g}s" if self.minimum_s else ""
        return f"duration (`500ms`, `5s`, `1m`, `1h`, `7d`){least}"

    def read(self, r: YamlReader, value: Any, key: str, context: Mapping[str, Any]) -> float:
        text = r.text(value, key)
        if not DURATION.match(text):
            raise r.fail(key, f"{r.shown(value, text)} is not a duration like 500ms, 1s or 1m")
        seconds = milliseconds(text) / 1000
        if seconds < self.minimum_s:
            why = f": {self.why}" if self.why else ""
            raise r.fail(key, f"{seconds:g}s is shorter than {self.minimum_s:g}s{why}")
        return seconds


@dataclass(frozen=True)
class OneOf:
    values: tuple[str, ...]

    @property
    def type_doc(self) -> str:
        return " or ".join(f"`{v}`" for v in self.values)

    def read(self, r: YamlReader, value: Any, key: str, context: Mapping[str, Any]) -> str:
        text = r.text(value, key)
        if text not in self.values:
            raise r.fail(key, f"expected {' or '.join(self.values)}, got {r.shown(value, text)}")
        return text


@dataclass(frozen=True)
class Patterns:
    """A list of whole-name regexes, each `${env:...}`-expanded and compiled once to check it."""

    type_doc: str = "list of regexes"

    def read(self, r: YamlReader, value: Any, key: str, context: Mapping[str, Any]) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise r.fail(key, "expected a list of regex strings")
        return tuple(r.regex(r.expand(p, f"{key}[{i}]"), f"{key}[{i}]", shown=p) for i, p in enumerate(value))


@dataclass(frozen=True)
class Texts:
    """A list of non-empty strings (paths, URIs), each `${env:...}`-expanded."""

    type_doc: str = "list of strings"

    def read(self, r: YamlReader, value: Any, key: str, context: Mapping[str, Any]) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise r.fail(key, f"expected a list of strings, got {value!r}")
        return tuple(r.text(v, f"{key}[{i}]") for i, v in enumerate(value))


@dataclass(frozen=True)
class Properties:
    """A map of client properties: scalar values as strings (booleans as `true`/`false`)."""

    refused: Mapping[str, str] = field(default_factory=dict)  # property -> what to set instead
    type_doc: str = "map of properties"

    def read(self, r: YamlReader, value: Any, key: str, context: Mapping[str, Any]) -> dict[str, str]:
        if not isinstance(value, dict):
            raise r.fail(key, "expected a mapping of client properties")
        out: dict[str, str] = {}
        for k, v in value.items():
            if k in self.refused:
                raise r.fail(f"{key}.{k}", self.refused[k])
            if isinstance(v, (dict, list)) or v is None:
                raise r.fail(f"{key}.{k}", "expected a scalar value")
            out[str(k)] = r.expand(str(v).lower() if isinstance(v, bool) else str(v), f"{key}.{k}")
        return out


@dataclass(frozen=True)
class Nested:
    """A mapping read by its own section, or (`many`) a list of such mappings."""

    section: Section
    many: bool = False

    @property
    def type_doc(self) -> str:
        return "list of mappings" if self.many else "mapping"

    def read(self, r: YamlReader, value: Any, key: str, context: Mapping[str, Any]) -> Any:
        if not self.many:
            return self.section.read(r, value, key, context)
        if not isinstance(value, list):
            raise r.fail(key, "expected a list")
        return tuple(self.section.read(r, item, f"{key}[{i}]", context) for i, item in enumerate(value))


# -- keys and sections ---------------------------------------------------------------------------


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Derived:
    """A default worked out from what was read before it: `of(values, context)` gives the value as
    it would be written in the file; `shown` says it in the reference."""

    of: Callable[[Mapping[str, Any], Mapping[str, Any]], Any]
    shown: str


@dataclass(frozen=True)
class Key:
    """One key: its `name` in the file, its `kind`, a one-line `doc`, its `default` as written in
    the file (REQUIRED, None for "not set", or `Derived`), and the field it fills (`attr`: the name,
    with `_s` for a duration)."""

    name: str
    kind: Kind
    doc: str
    default: Any = REQUIRED
    attr: str = ""

    @property
    def field(self) -> str:
        return self.attr or (f"{self.name}_s" if isinstance(self.kind, Period) else self.name)


def default_of(keys: tuple[Key, ...], name: str) -> Any:
    """A field's value when its key is not written, for the dataclass's field default: the key's
    default as written, read through its kind (None for a key without a fixed default)."""
    key = next(k for k in keys if k.name == name)
    if key.default is None or key.default is REQUIRED or isinstance(key.default, Derived):
        return None
    return key.kind.read(YamlReader("<default>"), key.default, name, {})


@dataclass(frozen=True)
class Read:
    """What a section read: each field's value, and each key's text as written (for errors)."""

    values: dict[str, Any]
    written: dict[str, Any]


# A rule across keys: given what was read, the key at fault and what to say, or None.
Rule = Callable[[Read], "tuple[str, str] | None"]


@dataclass(frozen=True)
class Section:
    """A mapping of the flow file: its keys in reading order (a derived default reads the keys
    before it), the rules across them, and what builds its value from the fields read (the
    section's dataclass; `located` also hands it `defined_at`, where it was written)."""

    path: str
    doc: str
    keys: tuple[Key, ...]
    rules: tuple[Rule, ...] = ()
    build: Callable[..., Any] = dict
    located: bool = False

    def read(self, r: YamlReader, raw: Any, path: str, context: Mapping[str, Any] | None = None) -> Any:
        raw = {} if raw is None else raw
        if not isinstance(raw, dict):
            raise r.fail(path or "<top>", f"expected a mapping, got {type(raw).__name__}")
        allowed = {k.name for k in self.keys}
        for name in raw:
            if name not in allowed:
                raise r.fail(_join(path, str(name)), f"unknown key (allowed: {', '.join(sorted(allowed))})")
        values: dict[str, Any] = {}
        written: dict[str, Any] = {}
        inner = dict(context or {})
        for key in self.keys:
            where = _join(path, key.name)
            value = raw.get(key.name)
            if key.default is REQUIRED and value in (None, ""):
                raise r.fail(where, "is required")
            if value is None:
                value = key.default.of(values, inner) if isinstance(key.default, Derived) else key.default
            written[key.name] = value
            values[key.field] = None if value is None else key.kind.read(r, value, where, inner)
            inner[key.field] = values[key.field]
        got = Read(values, written)
        for rule in self.rules:
            broken = rule(got)
            if broken:
                raise r.fail(_join(path, broken[0]), broken[1])
        if self.located:
            values["defined_at"] = f"{r.path}: {path}"
        return self.build(**values)


def reference(sections: tuple[tuple[str, Section], ...]) -> str:
    """The reference page: per section a table of key, type, default and meaning."""
    lines: list[str] = []
    for title, section in sections:
        lines += [f"## `{title}`" if title else "## Top level", "", " ".join(section.doc.split()), "",
                  "| key | type | default | meaning |", "|---|---|---|---|"]
        for key in section.keys:
            if key.default is REQUIRED:
                default = "required"
            elif isinstance(key.kind, Nested) and not key.kind.many:
                default = f"`{key.name}` below"
            elif key.default is None:
                default = "not set"
            elif isinstance(key.default, Derived):
                default = key.default.shown
            elif isinstance(key.kind, (Patterns, Texts, Properties, Nested)):
                default = f"`{json.dumps(key.default)}`" if key.default not in ([], {}) else "none"
            else:
                default = f"`{str(key.default).lower() if isinstance(key.default, bool) else key.default}`"
            lines.append(f"| `{key.name}` | {key.kind.type_doc} | {default} | {' '.join(key.doc.split())} |")
        lines.append("")
    return "\n".join(lines)
