"""The flow's Delta tables as Spark writes them, read back without a JVM."""

from __future__ import annotations

from dr_stream.index.index_table import OffsetIndex, runs_frame
from dr_stream.index.run_store import Run
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.positions.sync_outcome import COMMITTED, UNCHANGED
from dr_stream.positions.translation_log import TranslationLog
from dr_stream.positions.translation_rule import Translation


def test_runs_and_translations_written_by_spark_read_the_same_through_deltalake(spark, tmp_path):
    runs = [Run("c1", "t", 0, "t", 0, 0, 9, 100, 109, 1_700_000_000_000, 1_700_000_000_009, 1_700_000_001_000),
            Run("c1", "t", 1, "t", 1, 5, 5, 7, 7, None, None, None)]
    OffsetIndex(spark, str(tmp_path / "index")).append(runs_frame(spark, [(runs[0], 41), (runs[1], None)]))
    log = TranslationLog(str(tmp_path / "translations"), spark=spark)
    older = Translation(group="g", topic="t", partition=0, source_offset=3, source_timestamp=1, dest_topic="t",
                        dest_partition=0, offset=103, method="exact", note="", clamped=False, log_start=100,
                        log_end=110, last_copied=9, source_log_end=12, translated_at=1_700_000_000_000)
    newer = Translation(group="g", topic="t", partition=0, source_offset=5, source_timestamp=1, dest_topic="t",
                        dest_partition=0, offset=105, method="exact", note="", clamped=False, log_start=100,
                        log_end=110, last_copied=9, source_log_end=14, translated_at=1_700_000_005_000)
    log.append([(older, COMMITTED)])
    log.append([(newer, UNCHANGED)])

    tables = FlowTables.at(str(tmp_path / "index"), str(tmp_path / "translations"), spark=None)
    assert sorted(tables.index.runs(), key=lambda r: r.origin_partition) == runs
    assert tables.index.runs("other-cluster") == []
    assert tables.index.runs_topic_position() == 41
    assert tables.index.newest_origin_cluster() == "c1"
    assert [(c.group, c.offset) for c in tables.translations.last_commits()] == [("g", 5)]
    assert tables.translations.last_source_ends() == {("t", 0): 14}
    assert not tables.fell_back


def test_a_table_that_does_not_exist_reads_as_empty(tmp_path):
    tables = FlowTables.at(str(tmp_path / "nothing"), str(tmp_path / "nothing-either"), spark=None)
    assert (tables.index.runs(), tables.translations.latest(), tables.index.runs_topic_position()) == ([], [], None)
