"""The offset index's upkeep rule in delta-rs, as the flow's driver runs it (no JVM): the same
rule `test_index_table.py` runs through Spark, over the same rows."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from dr_stream.index.index_table import RUN_SCHEMA, OffsetIndex
from dr_stream.index.kept_runs import kept_runs_sql
from dr_stream.runtime.delta_appends import arrow_table

T0 = 1_767_225_600_000


def _table(tmp_path, rows: list[tuple[int, int, int, int]]) -> str:
    path = str(tmp_path / "offset-index")
    write_deltalake(path, arrow_table(RUN_SCHEMA, [("c1", "t", 0, "t", 0, a, b, c, d, d - c + 1, T0, T0, T0, None)
                                                   for a, b, c, d in rows]))
    return path


def _spans(path: str, sql: str = "SELECT * FROM t") -> list[tuple]:
    found = QueryBuilder().register("t", DeltaTable(path)).execute(
        f"SELECT origin_start, origin_end, dest_start, dest_end, records FROM ({sql}) AS q").read_all()
    columns = [found.column(i).to_pylist() for i in range(found.num_columns)]
    return sorted(zip(*columns, strict=True))


@pytest.mark.parametrize(("rows", "log_start", "kept"), [
    ([(0, 99, 0, 99), (100, 199, 100, 199), (200, 200, 205, 205)], 0,
     [(0, 199, 0, 199, 200), (200, 200, 205, 205, 1)]),  # split by batches: joined; a gap: apart
    ([(0, 9, 100, 109), (0, 19, 100, 119), (20, 29, 120, 129)], 0, [(0, 29, 100, 129, 30)]),  # one run republished
    ([(0, 9, 100, 109), (0, 9, 105, 114)], 0, [(0, 9, 100, 109, 10), (0, 9, 105, 114, 10)]),  # another mapping
    ([(0, 99, 0, 99), (100, 199, 100, 199), (300, 399, 305, 404)], 150, [(100, 199, 100, 199, 100),
                                                                       (300, 399, 305, 404, 100)]),  # retention
])
def test_the_rule_merges_runs_and_follows_retention_as_spark_does(tmp_path, rows, log_start, kept):
    path = _table(tmp_path, rows)
    assert _spans(path, kept_runs_sql({("t", 0): log_start})) == kept


def test_a_partition_without_a_known_log_start_keeps_its_runs(tmp_path):
    path = _table(tmp_path, [(0, 99, 0, 99)])
    assert _spans(path, kept_runs_sql({("other", 0): 500})) == [(0, 99, 0, 99, 100)]


def test_the_table_is_rewritten_to_what_it_keeps_from_the_driver(tmp_path):
    path = _table(tmp_path, [(0, 9, 0, 9), (10, 19, 10, 19), (20, 29, 20, 29)])
    index = OffsetIndex(None, path)  # type: ignore[arg-type]  # no Spark: delta-rs opens local disk

    done = index.keep({("t", 0): 10})

    assert done is not None and (done.rows_before, done.rows_after) == (3, 1)
    assert _spans(path) == [(10, 29, 10, 29, 20)]
    assert index.keep({("t", 0): 10}).rows_after == 1  # kept again: nothing changes
