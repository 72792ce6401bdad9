"""Which topics a flow copies and what they are called on the destination.

Both are plain values with no cluster access, so the driver (creating topics) and Spark
(subscribing, routing records) apply exactly the same rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

# Topics that belong to Kafka, Connect, MirrorMaker 2 or a schema registry. They are never
# replicated unless an include pattern names one of them exactly (`_schemas`, say).
INTERNAL_TOPICS: tuple[str, ...] = (
    r"__.*",
    r"_schemas",
    r"_confluent.*",
    r"connect-.*",
    r"mm2-.*",
    r".*\.internal",
)


@dataclass(frozen=True)
class TopicFilter:
    """Whole-name regex selection: included, not excluded, and not internal unless named.

    Invariant: `matches(t)` is true exactly when Spark's subscription to
    `subscribe_pattern()` picks up `t`; both use the one anchored pattern.
    """

    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()

    def subscribe_pattern(self) -> str:
        """One Java/Python regex, anchored at both ends (Spark would otherwise match substrings)."""
        if not self.include:
            return "^(?!)$"
        blocked = [*self.exclude, *INTERNAL_TOPICS]
        selected = "|".join(f"(?:{p})" for p in self.include)
        pattern = f"^(?!(?:{'|'.join(f'(?:{p})' for p in blocked)})$)(?:{selected})$"
        # Letters, digits, '_' and '-' mean the same in Java and Python regexes: no escaping needed.
        named = [p for p in self.include if self._is_literal_internal(p)
                 and not any(re.fullmatch(e, p) for e in self.exclude)]
        if named:
            pattern = f"{pattern}|^(?:{'|'.join(named)})$"
        return pattern

    @staticmethod
    def _is_literal_internal(pattern: str) -> bool:
        literal = re.fullmatch(r"[A-Za-z0-9_-]+", pattern) is not None
        return literal and any(re.fullmatch(i, pattern) for i in INTERNAL_TOPICS)

    @cached_property
    def _compiled(self) -> re.Pattern[str]:
        return re.compile(self.subscribe_pattern())

    @cached_property
    def _answers(self) -> dict[str, bool]:
        # Each name is matched once: a name comes back round after round, with each of its
        # partitions and each group that reads it.
        return {}

    def matches(self, topic: str) -> bool:
        answer = self._answers.get(topic)
        if answer is None:
            answer = self._answers[topic] = self._compiled.fullmatch(topic) is not None
        return answer


@dataclass(frozen=True)
class TopicRenamer:
    """Destination topic name from a template with one `${topic}`: `dc1.${topic}`, `${topic}.replica`."""

    template: str = "${topic}"

    def __post_init__(self) -> None:
        if self.template.count("${topic}") != 1:
            raise ValueError(f"rename template {self.template!r} must contain ${{topic}} exactly once")

    @property
    def affixes(self) -> tuple[str, str]:
        """What comes before and after the source topic's name."""
        prefix, suffix = self.template.split("${topic}")
        return prefix, suffix

    def is_identity(self) -> bool:
        return self.template == "${topic}"

    def format_remote_topic(self, topic: str) -> str:
        prefix, suffix = self.affixes
        return f"{prefix}{topic}{suffix}"

    def remote_filter(self, source: TopicFilter) -> TopicFilter:
        """The filter that selects, on the destination, the topics `source` selects on the source."""
        prefix, suffix = (re.escape(a) for a in self.affixes)

        def wrap(pattern: str) -> str:
            return pattern if self.is_identity() else f"{prefix}(?:{pattern}){suffix}"

        return TopicFilter(tuple(wrap(p) for p in source.include), tuple(wrap(p) for p in source.exclude))


# Groups that belong to replicators and tools, never to applications: never translated.
INTERNAL_GROUPS: tuple[str, ...] = (r"spark-kafka-.*", r"dr-stream-.*", r"connect-.*", r"_confluent.*")


@dataclass(frozen=True)
class GroupFilter:
    """Which consumer groups a flow translates (`offsets.groups`), internal ones never."""

    include: tuple[str, ...] = (".*",)
    exclude: tuple[str, ...] = ()

    @cached_property
    def _answers(self) -> dict[str, bool]:
        # Each name is matched once: a group comes back round after round, with each partition
        # it commits.
        return {}

    def matches(self, group: str) -> bool:
        answer = self._answers.get(group)
        if answer is None:
            blocked = any(re.fullmatch(p, group) for p in (*self.exclude, *INTERNAL_GROUPS))
            answer = self._answers[group] = not blocked and any(re.fullmatch(p, group) for p in self.include)
        return answer
