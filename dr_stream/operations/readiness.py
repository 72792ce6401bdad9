"""Whether a flow is ready for failover: the rules behind `dr-stream drill`.

Each rule turns what was read from the clusters and the flow's tables into checks, one per
topic, group, cluster or flow, each `ok`, `FAIL` or `skipped` (not judged, with why). A flow is
ready when no check failed. `drill` gathers the inputs; nothing here does I/O.

Invariant: every failing check names its subject (a topic by its source name, a group by its
name) and says what would go wrong at failover, so its line alone tells the operator what
to fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dr_stream.core.acl_mapping import Acl
from dr_stream.core.lag import PartitionLag
from dr_stream.core.policy import TopicRenamer
from dr_stream.positions import SyncOutcome
from dr_stream.replication.holds import Hold
from dr_stream.replication.losses import Loss

OK, FAIL, SKIPPED = "ok", "FAIL", "skipped"

# Translations that put a group exactly where it stopped: `waiting` is the copy not yet past
# the group's position, which the lag check judges against the RPO.
EXACT_METHODS = frozenset({"exact", "next", "returned", "waiting"})
# What a dry run of failover may say of a partition for the group to move when it is real.
MOVABLE = frozenset({SyncOutcome.WOULD_COMMIT, SyncOutcome.UNCHANGED})

# Every area a drill checks, in the order it reports them.
AREAS = ("clusters", "flow", "topics", "acls", "lag", "losses", "holds", "translation", "failover")

GroupPartition = tuple[str, str, int]


@dataclass(frozen=True)
class Check:
    area: str  # AREAS
    subject: str
    state: str
    detail: str

    @property
    def failed(self) -> bool:
        return self.state == FAIL

    def line(self) -> str:
        return f"{self.area} {self.subject}: {self.detail}"


@dataclass(frozen=True)
class Verdict:
    flow: str
    checks: tuple[Check, ...]

    @property
    def ready(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.failed]

    def as_dict(self) -> dict[str, Any]:
        return {"flow": self.flow, "ready": self.ready, "checks": [asdict(c) for c in self.checks],
                "failures": [c.line() for c in self.failures]}


def cluster_checks(aliases: Iterable[str], unreachable: Iterable[str]) -> list[Check]:
    down = set(unreachable)
    return [Check("clusters", a, FAIL, "does not answer") if a in down else Check("clusters", a, OK, "answers")
            for a in aliases]


def flow_check(flow: str, newest_sample_ms: int | None, now_ms: int, window_s: float) -> Check:
    """Judged from the lag samples a running flow records every few seconds on the destination:
    the one trace of it that any host can read, wherever the flow runs."""
    if newest_sample_ms is None:
        return Check("flow", flow, FAIL, f"recorded no lag sample in the last {window_s:g} s: it is not running")
    age = (now_ms - newest_sample_ms) / 1000
    if age > window_s:
        return Check("flow", flow, FAIL, f"last lag sample {age:.0f} s ago > {window_s:g} s: it is not running")
    return Check("flow", flow, OK, f"running (last lag sample {age:.0f} s ago)")


def health_check(flow: str, reasons: Iterable[str]) -> Check:
    """The running flow's own judgement (`/healthz`), when it drills itself."""
    reasons = list(reasons)
    return Check("flow", flow, FAIL, "; ".join(reasons)) if reasons else Check("flow", flow, OK, "healthy")


def topic_checks(source: Mapping[str, int], destination: Mapping[str, int], renamer: TopicRenamer,
                 aliases: tuple[str, str],
                 configs: Mapping[str, tuple[dict[str, str] | Exception, dict[str, str] | Exception]] | None
                 ) -> list[Check]:
    """Each selected source topic (`source`: name -> partitions) against its copy on the
    destination: present, as many partitions, and, when the flow syncs configs (`configs`:
    topic -> (source overrides, the copy's)), every source override equal on the copy."""
    src, dst = aliases
    if not source:
        return [Check("topics", "(none)", FAIL, f"no topic on {src} matches topics.include: nothing would fail over")]
    out = []
    for topic, partitions in sorted(source.items()):
        remote = renamer.format_remote_topic(topic)
        named = f" as {remote}" if remote != topic else ""
        if remote not in destination:
            out.append(Check("topics", topic, FAIL, f"missing on {dst}{named}"))
        elif destination[remote] != partitions:
            out.append(Check("topics", topic, FAIL, f"{dst}{named} has {destination[remote]} partitions, "
                                                    f"{src} has {partitions}"))
        elif configs is None:
            out.append(Check("topics", topic, OK, f"{partitions} partitions on both (configs not synced)"))
        else:
            out.append(_configs_check(topic, partitions, configs[topic], aliases))
    return out


def _configs_check(topic: str, partitions: int, configs: tuple[dict[str, str] | Exception, dict[str, str] | Exception],
                   aliases: tuple[str, str]) -> Check:
    theirs, ours = configs
    if isinstance(theirs, Exception) or isinstance(ours, Exception):
        alias, found = (aliases[0], theirs) if isinstance(theirs, Exception) else (aliases[1], ours)
        return Check("topics", topic, FAIL, f"configs unreadable on {alias}: {str(found).splitlines()[0]}")
    differ = sorted(k for k, v in theirs.items() if ours.get(k) != v)
    if differ:
        shown = ", ".join(f"{k} {aliases[0]}={theirs[k]} {aliases[1]}={ours.get(k, '(default)')}" for k in differ)
        return Check("topics", topic, FAIL, f"configs differ: {shown}")
    return Check("topics", topic, OK, f"{partitions} partitions, {len(theirs)} config overrides in step")


def acl_check(flow: str, wanted: Iterable[Acl], there: Iterable[Acl], unmappable: Iterable[tuple[Acl, str]],
              destination: str) -> Check:
    """With `acls.enabled`: every ACL the source's call for (`acl_mapping`) is on the destination,
    and none is left out for want of a mapping (a principal would lose access at failover)."""
    missing = sorted(set(wanted) - set(there))
    problems = [f"not on {destination}: {a.shown()}" for a in missing[:5]]
    if len(missing) > 5:
        problems.append(f"and {len(missing) - 5} more not on {destination}")
    problems += [f"cannot be copied: {a.shown()}: {why}" for a, why in unmappable]
    if problems:
        return Check("acls", flow, FAIL, "; ".join(problems))
    return Check("acls", flow, OK, f"{len(set(wanted))} ACLs in place on {destination}")


def loss_checks(flow: str, losses: Iterable[Loss], since_s: float) -> list[Check]:
    """A failing check per loss recorded in the last `since_s`: the destination misses those
    records, and a failover onto it makes that final, so an operator looks first (and re-drills
    with a shorter `--losses-since` once they have)."""
    found = [Check("losses", f"{x.topic}[{x.partition}]", FAIL, x.line()) for x in losses]
    return found or [Check("losses", flow, OK, f"none recorded in the last {since_s / 3600:g} h")]


def hold_checks(flow: str, held: Iterable[Hold]) -> list[Check]:
    """A failing check per partition held at a refused record: nothing after that record reaches
    the destination until an operator skips it (`dr-stream skip`), so a failover now would leave
    the partition's newer records behind."""
    found = [Check("holds", f"{h.topic}[{h.partition}]", FAIL, h.line()) for h in held]
    return found or [Check("holds", flow, OK, "no partition held at a refused record")]


def lag_checks(lags: Iterable[PartitionLag], rpo_s: float) -> list[Check]:
    """One check per source topic, judged by its most behind partition: a failover now loses
    what is not copied, so the oldest record waiting must be younger than the RPO. A partition
    the source no longer lists (records None) has nothing left to lose and is not judged."""
    by_topic: dict[str, list[PartitionLag]] = {}
    for g in lags:
        if g.lag_records is not None:
            by_topic.setdefault(g.topic, []).append(g)
    out = []
    for topic, parts in sorted(by_topic.items()):
        unknown = [g for g in parts if (g.lag_records or 0) > 0 and g.lag_seconds is None]
        records = sum(g.lag_records or 0 for g in parts)
        seconds = max((g.lag_seconds or 0.0 for g in parts), default=0.0)
        if unknown:
            shown = ", ".join(f"{topic}[{g.partition}]" for g in unknown[:5])
            out.append(Check("lag", topic, FAIL, f"age of the records waiting is unknown for {shown}"))
        elif seconds > rpo_s:
            worst = max(parts, key=lambda g: g.lag_seconds or 0.0)
            out.append(Check("lag", topic, FAIL, f"{records} records not copied, the oldest {seconds:.1f} s old "
                                                 f"({topic}[{worst.partition}]) > RPO {rpo_s:g} s"))
        else:
            out.append(Check("lag", topic, OK, f"{records} records not copied, oldest {seconds:.1f} s "
                                               f"(RPO {rpo_s:g} s)"))
    return out


def translation_checks(latest: Iterable[Mapping[str, Any]], commits: Mapping[GroupPartition, int], now_s: float,
                       max_age_s: float) -> list[Check]:
    """One check per group committed on the source (`commits`): each of its partitions has a
    recorded translation, by an exact method and not clamped, and the translation is current
    (at the group's committed offset) or younger than `max_age_s` (the group moved since and
    its translation is on its way). An idle group's translation may be as old as it likes."""
    rows = {(r["group"], r["topic"], r["partition"]): r for r in latest}
    by_group: dict[str, list[str]] = {}
    for key in sorted(commits):
        group, topic, partition = key
        problems = by_group.setdefault(group, [])
        row = rows.get(key)
        if row is None:
            problems.append(f"{topic}[{partition}] not translated yet")
            continue
        age = now_s - row["translated_at"].timestamp()
        if row["source_offset"] != commits[key] and age > max_age_s:
            problems.append(f"{topic}[{partition}] committed at {commits[key]}, translated at {row['source_offset']} "
                            f"{age:.0f} s ago > {max_age_s:g} s")
        elif row["method"] not in EXACT_METHODS:
            problems.append(f"{topic}[{partition}] translated by {row['method']}, not exactly")
        elif row["clamped"]:
            problems.append(f"{topic}[{partition}] clamped to the destination's log ({row['note']})")
    return [Check("translation", g, FAIL, "; ".join(p)) if p else
            Check("translation", g, OK, f"{sum(1 for k in commits if k[0] == g)} partitions exact and current")
            for g, p in sorted(by_group.items())]


def checkpoint_check(flow: str, uri: str, inexact: Sequence[str] | None, refused: str | None) -> Check:
    """An application's Spark checkpoint (`drill.spark_checkpoints`), from a dry run of
    `failover --spark-checkpoint`: it would move, every position exactly (`inexact`: the lines
    of those that would not), or it would be refused (`refused`: why)."""
    subject = f"{flow} spark checkpoint {uri}"
    if refused is not None:
        return Check("failover", subject, FAIL, f"would be refused: {refused}")
    if inexact:
        return Check("failover", subject, FAIL, "; ".join(inexact))
    return Check("failover", subject, OK, "every Kafka offset would move exactly")


def failover_checks(rows: Iterable[Any], refused: Mapping[str, str]) -> list[Check]:
    """One check per group from a dry run of failover (`rows`: `failover.GroupPosition`s): every
    partition would be committed (or is already there), by an exact method; `refused`: group ->
    why the destination would refuse dr-stream's commit (its authorizer). Partitions with the
    same problem are named together."""
    problems: dict[str, dict[str, list[str]]] = {}
    counts: dict[str, int] = {}
    for p in rows:
        t = p.translation
        mine = problems.setdefault(t.group, {})
        counts[t.group] = counts.get(t.group, 0) + 1
        if p.action.outcome not in MOVABLE:
            problem = p.action.text
        elif t.method not in EXACT_METHODS or t.clamped:
            problem = f"would land by {t.method}{' (clamped)' if t.clamped else ''}, not exactly"
        else:
            continue
        mine.setdefault(problem, []).append(f"{t.dest_topic}[{t.dest_partition}]")
    out = []
    for group, found in sorted(problems.items()):
        lines = [f"{', '.join(where)} {problem}" for problem, where in found.items()]
        if group in refused:
            lines.insert(0, refused[group])
        out.append(Check("failover", group, FAIL, "; ".join(lines)) if lines else
                   Check("failover", group, OK, f"{counts[group]} partitions would move exactly"))
    return out
