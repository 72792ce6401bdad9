"""What a flow can promise, decided once from its config.

* **indexed**: provenance is on, so the sink's producer publishes the runs of what it copied and
  the flow keeps an offset index (without provenance a copy cannot be told from an original).
* **exactly once** after a crash: indexed, and each destination partition takes one source
  partition's records in order (`topics.preserve_partitions`), so the index's last copy of a
  partition is where its copy stands.
* **translating**: exactly once, and `offsets.translate`: group positions are translated through
  the index (a position is exact only where copies keep their partition).

Every part of the flow and every command asks these here, and each promise a flow cannot make
is said once, at its start, with the key that would make it (`warnings`).
"""

from __future__ import annotations

from dataclasses import dataclass

_NEEDS_PARTITIONS = "offset translation needs topics.preserve_partitions: true"


@dataclass(frozen=True)
class Capabilities:
    indexed: bool
    exactly_once: bool
    translating: bool
    # why positions are not translated, when they are not (a key the operator can change)
    not_translated_because: str | None

    @classmethod
    def of(cls, provenance: bool, preserve_partitions: bool, translate: bool) -> Capabilities:
        exactly_once = provenance and preserve_partitions
        because = (None if exactly_once and translate
                   else "offsets.translate is false" if not translate
                   else "provenance is off: there is no offset index" if not provenance
                   else _NEEDS_PARTITIONS)
        return cls(provenance, exactly_once, because is None, because)

    def warnings(self) -> list[str]:
        """What a flow says at its start about the promises it cannot make."""
        out = []
        if not self.exactly_once:
            out.append("warning: exactly-once after a crash needs preserve_partitions and provenance; this flow is "
                       "at-least-once (a replayed batch may be written twice)")
        if not self.indexed:
            out.append("warning: provenance is off, so there is no offset index and no offset translation")
        elif self.not_translated_because == _NEEDS_PARTITIONS:
            out.append("warning: offset translation needs preserve_partitions: true; offsets are not translated")
        return out
