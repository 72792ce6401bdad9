"""The rule that refuses a cluster the flow's state does not belong to, and how the record is read."""

from __future__ import annotations

from dr_stream.runtime.recorded_clusters import first_per_role, wrong_cluster


def test_a_cluster_answering_with_the_recorded_id_passes():
    assert wrong_cluster("f.yaml", "destination", "dc2", "id-2", "id-2", "s/checkpoints/clusters") is None


def test_another_id_is_one_line_naming_the_file_the_key_both_ids_and_the_way_out():
    line = wrong_cluster("conf/f.yaml", "destination", "dc2", "id-3", "id-2", "s/checkpoints/clusters")
    assert line is not None and "\n" not in line
    assert line.startswith("conf/f.yaml: destination.bootstrap_servers: dc2 answers as cluster.id id-3, ")
    assert "belongs to cluster.id id-2" in line and "s/checkpoints/clusters" in line
    assert "dr-stream reset-flow --config conf/f.yaml" in line


def test_the_first_row_written_for_a_role_is_the_record_and_a_later_one_never_replaces_it():
    rows = [{"role": "destination", "cluster_id": "later", "recorded_at_ms": 20},
            {"role": "source", "cluster_id": "s", "recorded_at_ms": 10},
            {"role": "destination", "cluster_id": "first", "recorded_at_ms": 10}]
    assert first_per_role(rows) == {"source": "s", "destination": "first"}


def test_no_rows_is_no_record():
    assert first_per_role([]) == {}
