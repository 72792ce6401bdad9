"""A checkpoint a kill -9 left with a half-written first entry still starts (found in a fresh-clone
run: a real-time flow killed during its first batch failed every restart after it)."""

from __future__ import annotations

import pytest
from pyspark.errors import StreamingQueryException

from dr_stream.runtime.unfinished_writes import drop_unfinished_writes, unfinished

TMP = ".0.f53919f6-4220-4bb4-bec9-1d2dcc6f9dce.tmp"
TMP_CRC = "..0.f53919f6-4220-4bb4-bec9-1d2dcc6f9dce.tmp.crc"


def test_the_temporary_files_of_a_checkpoint_without_any_finished_batch_are_unfinished_writes():
    assert unfinished({"offsets": [], "commits": [TMP, TMP_CRC]}) == [f"commits/{TMP_CRC}", f"commits/{TMP}"]
    assert unfinished({"offsets": [TMP]}) == [f"offsets/{TMP}"]


def test_a_checkpoint_with_a_finished_batch_is_left_as_it_is():
    assert unfinished({"offsets": ["0", ".0.crc", ".1.abc.tmp"], "commits": [TMP]}) == []
    assert unfinished({"offsets": [], "commits": ["0", TMP]}) == []


def test_files_that_are_not_temporary_writes_are_never_taken():
    assert unfinished({"offsets": ["notes.txt", ".hidden"], "commits": []}) == []
    assert unfinished({}) == []


@pytest.mark.integration
def test_spark_refuses_such_a_checkpoint_and_starts_once_the_unfinished_writes_are_removed(spark, tmp_path):
    checkpoint = tmp_path / "checkpoint"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()
    (checkpoint / "commits" / TMP).write_text("v1\n")
    (checkpoint / "commits" / TMP_CRC).write_bytes(b"")

    def start():
        return (spark.readStream.format("rate").option("rowsPerSecond", 10).load()
                .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True).start())

    with pytest.raises(StreamingQueryException, match="STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"):
        start().awaitTermination(60)

    # Hadoop's local file system lists a file without its checksum and deletes the two together
    assert drop_unfinished_writes(spark, f"file:{checkpoint}") == [f"commits/{TMP}"]
    assert sorted(p.name for p in (checkpoint / "commits").iterdir()) == []
    started = start()
    started.awaitTermination(60)
    assert started.exception() is None
    assert started.lastProgress is not None and started.lastProgress["batchId"] == 0
