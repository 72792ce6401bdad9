"""Appends from the driver (delta-rs) land in the same Delta tables Spark writes and reads."""

from __future__ import annotations

import pytest
from pyspark.sql.types import LongType, StructField, StructType, TimestampType

from dr_stream.index.index_table import RUN_SCHEMA, OffsetIndex, runs_frame
from dr_stream.index.run_store import Run
from dr_stream.runtime.delta_appends import DeltaAppends, through_spark

pytestmark = pytest.mark.integration

SCHEMA = StructType([StructField("offset", LongType(), False), StructField("note", LongType(), True),
                     StructField("at", TimestampType(), True)])


def test_rows_appended_from_the_driver_read_back_through_spark_beside_the_rows_spark_wrote(spark, tmp_path):
    path = str(tmp_path / "table")
    appends = DeltaAppends(log=lambda line: pytest.fail(line))
    spark.createDataFrame([(1, None, None)], SCHEMA).write.format("delta").save(path)

    appends.append(path, SCHEMA, [(2, 20, 1_700_000_000_123), (3, None, None)], lambda: pytest.fail("through Spark"))

    rows = sorted((r["offset"], r["note"], r["at"] and int(r["at"].timestamp() * 1000))
                  for r in spark.read.format("delta").load(path).collect())
    assert rows == [(1, None, None), (2, 20, 1_700_000_000_123), (3, None, None)]
    assert appends.fell_back == {}


def test_an_index_table_written_before_runs_topic_offset_gains_the_column_from_a_driver_append(spark, tmp_path):
    path = str(tmp_path / "index")
    old = Run("c1", "t", 0, "t", 0, 0, 9, 100, 109, 1_700_000_000_000, 1_700_000_000_009, 1_700_000_001_000)
    runs_frame(spark, [(old, None)]).drop("runs_topic_offset").write.format("delta").save(path)
    new = Run("c1", "t", 0, "t", 0, 10, 19, 110, 119, None, None, None)

    OffsetIndex(spark, path, DeltaAppends(log=lambda line: pytest.fail(line))).append_runs([(new, 7)])

    table = spark.read.format("delta").load(path)
    assert table.columns == RUN_SCHEMA.fieldNames()
    assert sorted((r["origin_start"], r["records"], r["runs_topic_offset"]) for r in table.collect()) == [
        (0, 10, None), (10, 10, 7)]


def test_a_table_the_driver_cannot_write_is_appended_through_spark_and_said_once(tmp_path):
    lines: list[str] = []
    through_spark: list[int] = []
    counted: list[str] = []
    appends = DeltaAppends(log=lines.append, counted=counted.append)
    path = "hdfs://127.0.0.1:1/flows/x/translations"

    for n in (1, 2):
        appends.append(path, SCHEMA, [(n, None, None)], lambda n=n: through_spark.append(n))

    assert through_spark == [1, 2]
    assert counted == [path, path]
    assert len(lines) == 1 and lines[0].startswith(f"appending to {path} through Spark from now on")
    assert set(appends.fell_back) == {path}


def test_a_small_tables_rows_appended_through_spark_read_back_and_without_a_session_say_why(spark, tmp_path):
    path = str(tmp_path / "small")
    through_spark(lambda: spark, path, SCHEMA, [(4, 40, None)])
    through_spark(lambda: spark, path, SCHEMA, [(5, None, None)])
    rows = sorted((r["offset"], r["note"]) for r in spark.read.format("delta").load(path).collect())
    assert rows == [(4, 40), (5, None)]
    with pytest.raises(RuntimeError, match=r"small: written through Spark here; no session given"):
        through_spark(None, path, SCHEMA, [(6, None, None)])


def test_an_append_that_loses_every_commit_race_goes_through_spark_once_and_the_next_tries_the_driver_again(
        tmp_path, monkeypatch):
    import deltalake
    from deltalake.exceptions import CommitFailedError

    from dr_stream.runtime import delta_appends

    calls: list[int] = []

    def racing(*args, **kwargs):
        calls.append(1)
        if len(calls) <= delta_appends.COMMIT_ATTEMPTS:  # every commit of the first append loses
            raise CommitFailedError("a concurrent transaction deleted data this operation read")

    monkeypatch.setattr(deltalake, "write_deltalake", racing)
    monkeypatch.setattr("time.sleep", lambda s: None)  # the waits between commits
    lines: list[str] = []
    through: list[int] = []
    appends = DeltaAppends(log=lines.append)
    path = str(tmp_path / "raced")

    appends.append(path, SCHEMA, [(1, None, None)], lambda: through.append(1))
    appends.append(path, SCHEMA, [(2, None, None)], lambda: through.append(2))
    appends.append(path, SCHEMA, [(3, None, None)], lambda: through.append(3))

    assert through == [1]
    assert len(calls) == delta_appends.COMMIT_ATTEMPTS + 2
    assert appends.fell_back == {}
    assert len(lines) == 1 and "commits lost to other writers'" in lines[0]
