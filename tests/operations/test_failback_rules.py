"""Failback's pure parts: the restore instance's config, preconditions, the printed report."""

from __future__ import annotations

import pytest

from dr_stream.core.config import FilterOverride, parse_flow
from dr_stream.core.contracts import left_out_group
from dr_stream.kafka.cluster_context import FlowClusters
from dr_stream.operations.failback import FailbackError, FailbackReport, check_preconditions, restore_config
from dr_stream.operations.failover import Positions
from dr_stream.operations.report import format_failback
from dr_stream.operations.unreplicated import UnreplicatedPartition
from dr_stream.positions.returned_records import maps_back


def config(**sections):
    raw = {
        "source": {"alias": "dc2", "bootstrap_servers": "127.0.0.1:1"},
        "destination": {"alias": "dc1", "bootstrap_servers": "127.0.0.1:2"},
        "streaming": {"checkpoint_dir": "/x/cp", "offset_index": "/x/idx", "translations": "/x/tr"},
        **sections,
    }
    return parse_flow(raw, "back.yaml")


def test_restore_instance_lets_every_record_through_and_keeps_its_state_apart():
    restored = restore_config(config(), "20261121T000000")
    assert restored.provenance.filter_overrides == (FilterOverride(cluster=".*", topic=".*"),)
    assert restored.name == "dc2-to-dc1-restore"
    suffix = "-restore-20261121T000000"
    assert (restored.streaming.checkpoint_dir, restored.streaming.offset_index, restored.streaming.translations) == (
        f"/x/cp{suffix}", f"/x/idx{suffix}", f"/x/tr{suffix}")


def test_copies_map_back_to_originals_unless_the_flow_copies_destination_records_back():
    assert maps_back(config())
    assert not maps_back(restore_config(config(), "t"))


# a context connects to nothing until asked: the refusals come before any cluster is touched
NO_CLUSTERS = FlowClusters.of(config())


def test_failback_refuses_renamed_topics_before_touching_any_cluster():
    with pytest.raises(FailbackError, match=r"back.yaml: topics.rename: failback needs the same topic names"):
        check_preconditions(config(topics={"rename": "dc2.${topic}"}), NO_CLUSTERS)


def test_failback_refuses_a_flow_without_provenance():
    with pytest.raises(FailbackError, match=r"needs provenance\.enabled"):
        check_preconditions(config(provenance={"enabled": False}), NO_CLUSTERS)


def test_left_out_marks_live_in_a_group_named_after_the_cluster_they_must_not_reach():
    assert left_out_group("Xyz") == "dr-stream-left-out.Xyz"


def test_report_lists_unreplicated_records_with_offsets_timestamps_and_the_ordering_caveat():
    report = FailbackReport(
        flow="dc2-to-dc1", source="dc2", destination="dc1", mode="resume",
        unreplicated=[UnreplicatedPartition("orders", 0, 2, 9998, 9999, 1_700_000_000_000, 1_700_000_000_500,
                                            (9998, 9999))],
        unreplicated_action="left out", copied=1500, skipped=3000, seconds_to_zero_lag=4.2, state_dir="/x",
        positions=Positions([], True, "committed offsets on dc2 (live)"),
    )
    text = format_failback(report)
    assert "unreplicated: 2 records on dc1 never reached dc2: left out" in text
    assert "orders[0]: 2 records, offsets 9998..9999 (9998, 9999), timestamps 2023-11-14T22:13:20.000Z" in text
    assert "ordering:" in text
    assert "copied to dc1: 1500 records; skipped 3000 that came from dc1; lag 0 after 4.2s" in text
