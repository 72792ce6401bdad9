"""What a flow's /metrics shows for what its parts reported (pure: no Spark, no cluster)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dr_stream.core.lag import PartitionLag
from dr_stream.index.run_store import Run
from dr_stream.positions.sync_outcome import COMMITTED, REWOUND, UNCHANGED, WAITING, ahead, failed, held, not_translated
from dr_stream.replication.flow_metrics import FlowMetrics, action_label


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def scrape(metrics: FlowMetrics) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def run(dest_end: int, copied_at: int, topic: str = "orders") -> Run:
    return Run("c", topic, 0, topic, 0, 0, dest_end, 0, dest_end, 0, copied_at - 20, copied_at)


def test_copied_records_are_counted_per_topic_from_published_runs_only_since_the_process_started():
    metrics = FlowMetrics("f", "replicate-f", wall=lambda: 10.0)  # started at 10,000 ms
    metrics.runs_published([run(9, 5_000)])  # published by an earlier process: known, not counted
    metrics.runs_published([run(29, 20_000), run(39, 21_000, "payments")])
    samples = scrape(metrics)
    assert samples[("dr_stream_records_copied_total", (("flow", "f"), ("topic", "orders")))] == 20
    assert samples[("dr_stream_records_copied_total", (("flow", "f"), ("topic", "payments")))] == 40
    assert samples[("dr_stream_replication_latency_seconds_count", (("flow", "f"),))] == 60


def test_skips_lag_queries_syncs_and_translation_ages_appear_with_their_labels():
    clock = Clock()
    metrics = FlowMetrics("f", "replicate-f", ("dc1", "dc2"), clock=clock)
    metrics.query_started("replicate-f", restart=False)
    metrics.query_started("replicate-f", restart=True)
    metrics.batch_done("replicate-f", {"came_from_destination": 7, "left_out": 2})
    metrics.lag_sampled([PartitionLag("orders", 0, 50, 39, 10, 2.5), PartitionLag("orders", 1, 9, 8, 0, 0.0)], ["dc2"])
    metrics.groups_synced([COMMITTED, held("Stable", 1), COMMITTED])
    metrics.share_groups_not_synced("offsets", 2)
    metrics.appended_through_spark("hdfs://nn/flows/f/translations")
    metrics.appended_through_spark("hdfs://nn/flows/f/translations")
    metrics.share_groups_not_synced("offsets", 1)
    metrics.share_groups_not_synced("settings", 0)
    metrics.partitions_reread(2)
    metrics.translation_ages = lambda: {"g1": 0.0, "g2": 4.5}
    metrics.trigger_set(1000)
    metrics.trigger_set(5000)  # widened, the query restarted with it
    s = scrape(metrics)
    assert s[("dr_stream_records_skipped_total", (("flow", "f"), ("reason", "came_from_destination")))] == 7
    assert s[("dr_stream_records_skipped_total", (("flow", "f"), ("reason", "already_copied")))] == 0
    assert s[("dr_stream_lag_records", (("flow", "f"), ("partition", "0"), ("topic", "orders")))] == 10
    assert s[("dr_stream_lag_seconds", (("flow", "f"), ("partition", "0"), ("topic", "orders")))] == 2.5
    assert s[("dr_stream_query_active", (("flow", "f"), ("query", "replicate-f")))] == 1
    assert s[("dr_stream_query_restarts_total", (("flow", "f"), ("query", "replicate-f")))] == 1
    assert s[("dr_stream_trigger_seconds", (("flow", "f"), ("query", "replicate-f")))] == 5.0
    assert s[("dr_stream_groups_synced_total", (("action", "committed"), ("flow", "f")))] == 2
    assert s[("dr_stream_groups_synced_total", (("action", "skipped_active"), ("flow", "f")))] == 1
    assert s[("dr_stream_translation_age_seconds", (("flow", "f"), ("group", "g2")))] == 4.5
    assert s[("dr_stream_share_groups_not_synced_total", (("flow", "f"), ("what", "offsets")))] == 3
    assert ("dr_stream_share_groups_not_synced_total", (("flow", "f"), ("what", "settings"))) not in s
    assert s[("dr_stream_delta_appends_through_spark_total",
              (("flow", "f"), ("table", "hdfs://nn/flows/f/translations")))] == 2
    assert s[("dr_stream_partitions_reread_total", (("flow", "f"),))] == 2
    assert s[("dr_stream_cluster_up", (("cluster", "dc2"), ("flow", "f")))] == 0
    assert s[("dr_stream_cluster_up", (("cluster", "dc1"), ("flow", "f")))] == 1
    assert metrics.lag_records() == 10


def test_health_follows_progress_and_the_clusters():
    clock = Clock()
    metrics = FlowMetrics("f", "replicate-f", ("dc1", "dc2"), clock=clock)
    metrics.query_started("replicate-f", restart=False)
    assert metrics.health(10).ok
    clock.now += 11
    assert not metrics.health(10).ok
    metrics.lag_sampled([PartitionLag("t", 0, 5, 4, 0, 0.0)], [])  # nothing to copy counts as progress
    assert metrics.health(10).ok
    metrics.lag_sampled([PartitionLag("t", 0, 5, 4, 0, 0.0)], ["dc2"])
    assert metrics.health(10).reasons == ("cluster dc2 does not answer",)


def test_sync_actions_become_a_few_fixed_labels():
    assert [action_label(a) for a in (COMMITTED, REWOUND, UNCHANGED, ahead(9), not_translated("waiting"),
                                      failed("timed out"), WAITING)] == [
        "committed", "rewound", "unchanged", "skipped_ahead", "not_translated", "failed", "other"]


def test_each_control_loops_last_round_its_items_and_period_appear_and_show_on_the_progress_line():
    metrics = FlowMetrics("f", "replicate-f")
    assert metrics.loops_shown() == ""  # no round yet: the progress line says nothing of loops
    metrics.loop_round("poller", 0.25, 5000, 0.75)
    metrics.loop_round("topics", 0.04, 100, 5.04)
    metrics.loop_round("poller", 0.5, 5001, 1.0)  # the newest round replaces the last
    samples = scrape(metrics)
    poller, topics = (("flow", "f"), ("loop", "poller")), (("flow", "f"), ("loop", "topics"))
    assert samples[("dr_stream_loop_round_seconds", poller)] == 0.5
    assert samples[("dr_stream_loop_round_items", poller)] == 5001
    assert samples[("dr_stream_loop_period_seconds", poller)] == 1.0
    assert samples[("dr_stream_loop_round_items", topics)] == 100
    assert metrics.loops_shown() == "poller 0.50 s/5001 every 1.00 s, topics 0.04 s/100 every 5.04 s"


def test_the_periodic_drills_verdict_appears_only_once_a_drill_ran():
    metrics = FlowMetrics("f", "replicate-f")
    assert not any(name.startswith("dr_stream_drill") for name, _ in scrape(metrics))

    metrics.drilled(False, {"topics": 2, "lag": 0}, at=1_800_000_000.0)

    found = scrape(metrics)
    assert found[("dr_stream_drill_ready", (("flow", "f"), ("result", "last")))] == 0.0
    assert found[("dr_stream_drill_failures", (("check", "topics"), ("flow", "f")))] == 2.0
    assert found[("dr_stream_drill_failures", (("check", "lag"), ("flow", "f")))] == 0.0
    assert found[("dr_stream_drill_timestamp_seconds", (("flow", "f"), ("result", "last")))] == 1_800_000_000.0


def test_acl_sync_passes_show_what_they_changed_and_what_they_did_not_copy_as_it_is():
    metrics = FlowMetrics("f", "replicate-f")
    assert not any(name.startswith("dr_stream_acls_not_copied") for name, _ in scrape(metrics))  # no pass yet
    metrics.acls_synced(3, 0, {"narrowed": 2, "refused": 1})
    metrics.acls_synced(0, 1, {"narrowed": 1, "unmappable": 1})
    s = scrape(metrics)
    assert s[("dr_stream_acls_changed_total", (("change", "created"), ("flow", "f")))] == 3
    assert s[("dr_stream_acls_changed_total", (("change", "removed"), ("flow", "f")))] == 1
    # the last pass's state, not a sum: a narrowing said once is still in force
    assert s[("dr_stream_acls_not_copied", (("flow", "f"), ("how", "narrowed")))] == 1
    assert s[("dr_stream_acls_not_copied", (("flow", "f"), ("how", "unmappable")))] == 1
    assert s[("dr_stream_acls_not_copied", (("flow", "f"), ("how", "refused")))] == 0
