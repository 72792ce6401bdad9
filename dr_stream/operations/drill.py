"""`dr-stream drill`: whether failover would work now, checked without changing anything.

Reads both clusters and the flow's tables, then judges with `readiness`:
- clusters: both answer (when one does not, nothing else can be judged);
- flow: it runs (its lag samples on the destination are recent), or, in the flow's own
  periodic drill, its `/healthz` rule;
- topics: every selected source topic exists on the destination under its remote name, with
  the same partition count and, when the flow syncs configs, the same config overrides;
- acls: with `acls.enabled`, every ACL the source's call for is on the destination and none
  is left out for want of a mapping (not judged when the flow does not sync ACLs);
- lag: the oldest record not copied of each topic is younger than the RPO;
- losses: no loss recorded in the flow's ledger lately (`drill.losses_since`, 7 days);
- translation: every selected group committed on the source has a recorded translation of
  each partition, exact, not clamped and current;
- failover: a dry run of `failover` for every group: each partition would be committed (or
  is already there), exactly, and the destination's authorizer lets dr-stream commit; and a
  dry run of `failover --spark-checkpoint` for each of `drill.spark_checkpoints`.

Invariant: no request here writes to a cluster or a table.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

from confluent_kafka.admin import AdminClient

from dr_stream.core.config import FlowConfig
from dr_stream.core.monitoring_config import DrillConfig
from dr_stream.kafka.acls import describe_acls
from dr_stream.kafka.admin import copyable_configs_of, partition_counts
from dr_stream.kafka.authorization import NotAuthorized, not_authorized
from dr_stream.kafka.cluster_context import FlowClusters
from dr_stream.kafka.group_offsets.consumer_groups import authorized_operations
from dr_stream.operations.failover import failover
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.operations.readiness import (
    AREAS,
    FAIL,
    SKIPPED,
    Check,
    Verdict,
    acl_check,
    checkpoint_check,
    cluster_checks,
    failover_checks,
    flow_check,
    hold_checks,
    lag_checks,
    loss_checks,
    topic_checks,
    translation_checks,
)
from dr_stream.operations.spark_checkpoint import CheckpointError, move_checkpoint
from dr_stream.operations.status import replication_lag, source_commits
from dr_stream.positions import TranslationLog
from dr_stream.replication.acl_sync import wanted_acls
from dr_stream.replication.lag_history import read_samples
from dr_stream.runtime.delta_reads import DeltaReads

# A group that moved just before the drill read it has its translation a moment later: a
# failing translation check is read once more after this long before it counts.
SETTLE_S = 2.0


def drill(config: FlowConfig, tables: FlowTables, limits: DrillConfig | None = None,
          flow_health: Check | None = None, log: Callable[[str], None] = print) -> Verdict:
    """Every check, changing nothing; one context per cluster serves them all (`cluster_context`)."""
    with FlowClusters.of(config, tables.spark) as clusters:
        return _drill(config, tables, clusters, limits or config.drill, flow_health, log)


def _drill(config: FlowConfig, tables: FlowTables, clusters: FlowClusters, limits: DrillConfig,
           flow_health: Check | None, log: Callable[[str], None]) -> Verdict:
    down = clusters.unreachable()
    checks = cluster_checks((config.source.alias, config.destination.alias), down)
    if down:
        why = f"{' and '.join(down)} does not answer"
        return Verdict(config.name, tuple(checks + [Check(area, config.name, SKIPPED, why) for area in AREAS[1:]]))
    checks.append(flow_health or _flow_running(config, clusters))
    source, destination = clusters.source.admin, clusters.destination.admin
    checks += _topics(config, source, destination)
    checks.append(_acls(config, source, destination))
    lags = [g for g in replication_lag(config, tables, clusters) if config.topic_filter.matches(g.topic)]
    checks += lag_checks(lags, limits.rpo_s)
    since = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=limits.losses_since_s)
    checks += loss_checks(config.name, tables.losses.read(since), limits.losses_since_s)
    checks += hold_checks(config.name, tables.holding().held.values())
    why_not = config.capabilities.not_translated_because
    if why_not:
        checks += [Check(area, config.name, SKIPPED, why_not) for area in ("translation", "failover")]
    else:
        checks += _translations(config, tables, clusters, limits.max_translation_age_s)
        checks += _failover(config, tables, clusters, log)
        checks += _checkpoints(config, tables, clusters, limits.spark_checkpoints, log)
    return Verdict(config.name, tuple(checks))


def _checkpoints(config: FlowConfig, tables: FlowTables, clusters: FlowClusters, uris: tuple[str, ...],
                 log: Callable[[str], None]) -> list[Check]:
    if not uris:
        return []
    if tables.spark is None:
        return [Check("failover", f"{config.name} spark checkpoints", SKIPPED,
                      "reading checkpoints takes a Spark session, and this drill has none")]
    spark = tables.spark()
    out = []
    for uri in uris:
        try:
            move = move_checkpoint(config, tables, spark, uri, dry_run=True, log=log, clusters=clusters)
        except CheckpointError as exc:
            out.append(checkpoint_check(config.name, uri, None, str(exc)))
        else:
            out.append(checkpoint_check(config.name, uri, [p.line() for p in move.inexact], None))
    return out


def _flow_running(config: FlowConfig, clusters: FlowClusters) -> Check:
    window = config.metrics.health_window_s
    now = int(time.time() * 1000)
    samples = read_samples(clusters.destination, config.name, now - int(window * 1000))
    return flow_check(config.name, samples[-1].at_ms if samples else None, now, window)


def _topics(config: FlowConfig, source_admin: AdminClient, dest_admin: AdminClient) -> list[Check]:
    source = {t: n for t, n in partition_counts(source_admin).items() if config.topic_filter.matches(t)}
    destination = partition_counts(dest_admin)
    configs = None
    if config.topics.sync_configs:
        remote = {t: config.renamer.format_remote_topic(t) for t in source}
        present = sorted(t for t in source if destination.get(remote[t]) == source[t])
        theirs = copyable_configs_of(source_admin, present)
        ours = copyable_configs_of(dest_admin, [remote[t] for t in present])
        configs = {t: (theirs[t], ours[remote[t]]) for t in present}
    return topic_checks(source, destination, config.renamer, (config.source.alias, config.destination.alias), configs)


def _acls(config: FlowConfig, source: AdminClient, destination: AdminClient) -> Check:
    if not config.acls.enabled:
        return Check("acls", config.name, SKIPPED, "not synced by this flow (acls.enabled is false)")
    try:
        mapping = wanted_acls(config, source)
        there = describe_acls(destination, config.destination)
    except NotAuthorized as exc:
        return Check("acls", config.name, FAIL, str(exc))
    return acl_check(config.name, mapping.wanted, there, mapping.unmappable, config.destination.alias)


def _translations(config: FlowConfig, tables: FlowTables, clusters: FlowClusters, max_age_s: float) -> list[Check]:
    commits = source_commits(config, clusters)
    if not commits:
        return [Check("translation", config.name, SKIPPED,
                      f"no selected group has committed offsets on {config.source.alias}")]
    now = time.time()
    checks = translation_checks(tables.translations.latest(), commits, now, max_age_s)
    if any(c.failed for c in checks):  # read again, past the snapshot the tables keep for one command
        time.sleep(SETTLE_S)
        reads = tables.translations.reads
        again = TranslationLog(tables.translations.path, DeltaReads(reads.spark, reads.log))
        checks = translation_checks(again.latest(), commits, now, max_age_s)
    return checks


def _failover(config: FlowConfig, tables: FlowTables, clusters: FlowClusters,
              log: Callable[[str], None]) -> list[Check]:
    positions = failover(config, tables, dry_run=True, log=log, clusters=clusters)
    if not positions.rows:
        return [Check("failover", config.name, SKIPPED, f"no selected group to move from {config.source.alias}")]
    groups = sorted({p.translation.group for p in positions.rows})
    refused = {}
    for group, found in authorized_operations(clusters.destination.admin, groups).items():
        # An empty set is a broker that did not say (the group unknown to it): not judged.
        if isinstance(found, set) and found and "READ" not in found:
            refused[group] = str(not_authorized(config.destination.alias, config.destination.kafka, "READ",
                                                f"GROUP {group}", "committing its offsets at failover"))
    return failover_checks(positions.rows, refused)
