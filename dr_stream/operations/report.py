"""Every table and report an operator reads: presentation only, computed elsewhere.

`format_positions` (translate, failover), `format_checkpoint_move` (failover --spark-checkpoint),
`format_failback`, `format_status` and `format_drill` turn the results of those commands into
text; `--json` prints the same results as data instead.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only: importing failback would load Spark's Python side into every command
    from dr_stream.core.lag import PartitionLag
    from dr_stream.operations.failback import FailbackReport
    from dr_stream.operations.failover import Positions
    from dr_stream.operations.readiness import Verdict
    from dr_stream.operations.spark_checkpoint import CheckpointMove
    from dr_stream.operations.status import TranslationAge


def format_positions(positions: Positions) -> str:
    header = ("group", "topic", "part", "source offset", "translated", "dest log start", "dest log end",
              "method", "action")
    lines = [header]
    notes = []
    for p in positions.rows:
        t = p.translation
        lines.append((t.group, t.dest_topic, str(t.partition), str(t.source_offset), _text(t.offset),
                      _text(t.log_start), _text(t.log_end), t.method, p.action.text or "-"))
        if t.note:
            notes.append(f"  {t.group} {t.dest_topic}[{t.partition}]: {t.note}")
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    out = [f"source positions: {positions.origin}"]
    out += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in lines]
    if notes:
        out += ["reported:", *notes]
    lost = {(p.translation.topic, p.translation.partition): p.translation for p in positions.rows
            if p.translation.unreplicated}
    for (topic, partition), t in sorted(lost.items()):
        out.append(f"RPO: {topic}[{partition}] has {t.unreplicated} records on the source that were never "
                   f"copied (origin offsets {t.last_copied + 1 if t.last_copied is not None else 0}.."
                   f"{(t.source_log_end or 0) - 1}); the groups resume after the last copied record")
    if not positions.rows:
        out.append("(no matching group positions)")
    return "\n".join(out)


def format_checkpoint_move(move: CheckpointMove) -> str:
    if move.finished_earlier:
        return f"{move.checkpoint}: finished the move recorded in {move.change}; {move.resumes()}"
    verb = "would rewrite" if move.dry_run else "rewrote"
    out = [f"source positions: {move.origin}",
           f"{verb} offsets/{', offsets/'.join(str(b) for b in move.batches)}; {move.resumes()}"]
    for key, positions in move.positions.items():
        for p in positions:
            out.append(f"  {key}: {p.topic}[{p.partition}] {p.source_offset} -> {p.dest_topic}[{p.partition}] "
                       f"{_text(p.offset)} ({p.method}{': ' + p.note if p.note else ''})")
    if move.change:
        out.append(f"the originals and the change are in {move.change} (`--undo` puts them back)")
    return "\n".join(out)


def _text(value: int | None) -> str:
    return "-" if value is None else str(value)


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def format_failback(report: FailbackReport) -> str:
    src, dst = report.source, report.destination
    out = [f"failback {src} -> {dst} ({report.mode}, flow {report.flow})"]
    total = sum(p.records for p in report.unreplicated)
    out.append(f"unreplicated: {total} records on {dst} never reached {src}: {report.unreplicated_action}")
    for p in report.unreplicated:
        shown = ", ".join(map(str, p.offsets)) + (" ..." if p.records > len(p.offsets) else "")
        out.append(f"  {p.topic}[{p.partition}]: {p.records} records, offsets {p.first_offset}..{p.last_offset} "
                   f"({shown}), timestamps {_when(p.first_timestamp)} .. {_when(p.last_timestamp)}")
    if report.unreplicated:
        landed = "on" if report.unreplicated_copied else "copied, they would land on"
        out.append(f"  ordering: {landed} {src} after the records {src} "
                   "received meanwhile, so the partition's order would differ between the clusters; consumers "
                   "that depend on it must handle that")
    out.append(f"copied to {dst}: {report.copied} records; skipped {report.skipped} that came from {dst}; "
               f"lag 0 after {report.seconds_to_zero_lag}s")
    out.append(format_positions(report.positions))
    out += [format_checkpoint_move(move) for move in report.checkpoints]
    out += [f"checkpoint refused: {line}" for line in report.checkpoints_refused]
    if report.mode == "restore":
        out.append(f"next: point producers and consumers at {dst}, then `dr-stream reset-flow` and `dr-stream run` "
                   f"the {dst}-to-{src} flow: its checkpoints and index describe {dst}'s lost data")
    else:
        out.append(f"next: point producers and consumers at {dst}, then `dr-stream run` the {dst}-to-{src} flow; "
                   f"it resumes from its checkpoint and skips what came from {src}")
    return "\n".join(out)


def format_status(lags: list[PartitionLag], ages: list[TranslationAge]) -> str:
    def cell(v: object) -> str:
        return "-" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v))

    out = ["replication lag (topic partition: source log end, last copied origin offset, lag records, lag seconds)"]
    out += [f"  {g.topic}[{g.partition}]: {cell(g.source_log_end)}, {cell(g.last_copied)}, "
            f"{cell(g.lag_records)}, {cell(g.lag_seconds)}" for g in lags] or ["  (nothing replicated yet)"]
    out.append("last translated offsets (group topic partition: source offset -> destination offset, method, "
               "age seconds, action)")
    out += [f"  {a.group} {a.topic}[{a.partition}]: {a.source_offset} -> {cell(a.offset)}, {a.method}, "
            f"{a.age_seconds:.1f}s, {a.action or '-'}" for a in ages] or ["  (no translations recorded)"]
    return "\n".join(out)


def format_drill(verdict: Verdict) -> str:
    rows = [("check", "subject", "state", "detail")] + [(c.area, c.subject, c.state, c.detail) for c in verdict.checks]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    out = ["  ".join([*(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)), row[3]]).rstrip()
           for row in rows]
    failures = verdict.failures
    out.append(f"verdict: flow {verdict.flow} is READY for failover" if not failures else
               f"verdict: flow {verdict.flow} is NOT READY for failover: {len(failures)} of {len(verdict.checks)} "
               f"checks failed")
    return "\n".join(out)


def json_document(document: dict[str, Any]) -> str:
    """`document` as JSON (`--json`), each object of a list of objects on a line of its own:
    readable, and written by json's C encoder (an indent makes json use its Python one, which
    took seconds over a failover's 10,000 positions)."""

    def value(v: Any) -> str:
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            return "[\n" + ",\n".join("  " + json.dumps(x) for x in v) + "\n]"
        return json.dumps(v)

    return "{" + ",\n".join(f"{json.dumps(k)}: {value(v)}" for k, v in document.items()) + "}"
