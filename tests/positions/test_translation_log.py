"""The translation log keeps what is live: the newest row per position (and per source partition
the newest that recorded the source's log end), however many rows a flow appended, and a
compaction never loses a row appended while it ran. (delta-rs on local disk, no JVM.)"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from dr_stream.positions.gone_positions import GONE
from dr_stream.positions.sync_outcome import COMMITTED, NOTHING, Synced
from dr_stream.positions.translation_log import TranslationLog
from dr_stream.positions.translation_rule import Translation
from dr_stream.runtime.delta_reads import DeltaReads

GROUPS, PARTITIONS = 5, 4


def row(group: int, partition: int, offset: int, at: int, source_end: int | None = None) -> tuple[Translation, Synced]:
    return Translation(group=f"g{group}", topic="orders", partition=partition, source_offset=offset,
                       source_timestamp=at, dest_topic="orders", dest_partition=partition, offset=offset,
                       method="exact", note="", clamped=False, log_start=0, log_end=offset + 10,
                       last_copied=offset, source_log_end=source_end, translated_at=at), COMMITTED


def _log(tmp_path) -> TranslationLog:
    return TranslationLog(str(tmp_path / "translations"), DeltaReads(None))


def _rows(log: TranslationLog) -> int:
    return log.reads.query(log.path, "SELECT count(*) AS n FROM t", latest=True)[0]["n"]


def test_a_compacted_log_holds_one_row_per_position_and_answers_as_before(tmp_path):
    log = _log(tmp_path)
    at = 1_000
    for round_ in range(30):  # every position moves 30 times
        at += 1
        log.append([row(g, p, round_ * 10, at, source_end=round_ * 10 + 5 if g == 0 else None)
                    for g in range(GROUPS) for p in range(PARTITIONS)])
    before = (log.latest(), log.last_source_ends())
    assert _rows(log) == 30 * GROUPS * PARTITIONS

    done = log.compact()

    assert done is not None and (done.rows_before, done.rows_after) == (30 * GROUPS * PARTITIONS, GROUPS * PARTITIONS)
    assert _rows(log) == GROUPS * PARTITIONS
    log.reads = DeltaReads(None)
    assert (log.latest(), log.last_source_ends()) == before


def test_the_newest_source_log_end_survives_a_newer_row_of_its_position_without_one(tmp_path):
    log = _log(tmp_path)
    log.append([row(0, 0, 10, 1, source_end=50)])
    log.append([row(0, 0, 20, 2, source_end=None)])
    log.compact()
    assert log.last_source_ends() == {("orders", 0): 50}
    assert [r["source_offset"] for r in log.latest()] == [20]
    assert _rows(log) == 2


def test_rows_appended_while_a_compaction_runs_are_kept(tmp_path):
    log = _log(tmp_path)
    log.append([row(0, 0, 0, 1)])
    stop = threading.Event()
    compactions = []

    def compact() -> None:
        while not stop.is_set():
            compactions.append(TranslationLog(log.path, DeltaReads(None)).compact())

    compactor = threading.Thread(target=compact)
    compactor.start()
    appended = 1
    deadline = time.monotonic() + 120
    try:
        # a new position each append, on until several compactions ran among them (however slow
        # the machine is, the appends must overlap compactions for the test to prove anything)
        while appended < 40 or (len(compactions) < 3 and time.monotonic() < deadline):
            log.append([row(appended, 0, appended, 1 + appended)])
            appended += 1
    finally:
        stop.set()
        compactor.join()
    assert len(compactions) > 2
    log.reads = DeltaReads(None)
    assert sorted(r["group"] for r in log.latest()) == sorted(f"g{i}" for i in range(appended))


def test_a_log_that_does_not_exist_yet_is_not_compacted(tmp_path):
    assert _log(tmp_path).compact() is None


def gone(group: int, partition: int, at: int) -> tuple[Translation, Synced]:
    t, _ = row(group, partition, 0, at)
    return replace(t, method=GONE, offset=None, source_log_end=None), NOTHING


def test_a_gone_position_is_never_read_as_live_and_compaction_drops_its_rows(tmp_path):
    log = _log(tmp_path)
    log.append([row(0, 0, 10, 1), row(1, 0, 10, 1), row(1, 1, 10, 1)])
    log.append([gone(1, 0, 2), gone(1, 1, 2)])
    assert [(r["group"], r["partition"]) for r in log.latest()] == [("g0", 0)]
    log.compact()
    assert _rows(log) == 1
    log.append([row(1, 0, 30, 3)])  # the group made again
    log.reads = DeltaReads(None)
    assert [(r["group"], r["source_offset"]) for r in log.latest()] == [("g0", 10), ("g1", 30)]


def test_a_deleted_topic_s_log_ends_leave_with_its_last_position(tmp_path):
    log = _log(tmp_path)
    log.append([row(0, 0, 10, 1, source_end=50), row(0, 1, 10, 1, source_end=60)])
    log.append([gone(0, 1, 2)])
    log.compact()
    assert log.last_source_ends() == {("orders", 0): 50}
    assert _rows(log) == 1


def test_a_gone_position_whose_old_row_holds_its_partition_s_log_end_stays_gone(tmp_path):
    log = _log(tmp_path)
    log.append([row(0, 0, 10, 1, source_end=50), row(1, 0, 20, 2)])  # g1 live on the partition
    log.append([gone(0, 0, 3)])
    log.compact()
    assert [r["group"] for r in log.latest()] == ["g1"]
    assert log.last_source_ends() == {("orders", 0): 50}


def test_a_gone_row_in_the_same_millisecond_as_its_position_s_last_row_is_the_newer(tmp_path):
    for first_appended in ("row", "gone"):  # whichever file a reader meets first
        log = TranslationLog(str(tmp_path / first_appended), DeltaReads(None))
        appends = [[row(0, 0, 10, 5), row(1, 0, 20, 5)], [gone(0, 0, 5)]]
        for rows in appends if first_appended == "row" else appends[::-1]:
            log.append(rows)
        assert [r["group"] for r in log.latest()] == ["g1"], first_appended
        log.compact()
        log.reads = DeltaReads(None)
        assert [r["group"] for r in log.latest()] == ["g1"] and _rows(log) == 1, first_appended


def _files(path) -> tuple[int, int]:
    """(data files, log entries) on disk."""
    return len(list(path.glob("*.parquet"))), len(list((path / "_delta_log").glob("*.json")))


def test_what_a_compaction_replaced_stays_for_the_retention_and_then_leaves_the_disk(tmp_path):
    """Files a rewrite replaced are kept for readers of an older version, `streaming.old_versions_retention`
    long, then deleted: on disk a log keeps its live rows plus that long of replaced files."""
    import time

    log = TranslationLog(str(tmp_path / "translations"), DeltaReads(None), retention_s=1.0)
    for round_ in range(10):
        log.append([row(g, p, round_, round_ + 1) for g in range(GROUPS) for p in range(PARTITIONS)])
    first = log.compact()
    assert first is not None and first.files_deleted == 0, "replaced a moment ago: an older reader may need them"
    assert _files(tmp_path / "translations")[0] == 11
    time.sleep(1.5)
    log.append([row(0, 0, 99, 99)])
    second = log.compact()
    assert second is not None and second.files_deleted == 10  # the ten appends' files the first compaction replaced
    assert _files(tmp_path / "translations")[0] == 3  # the first compaction's, the last append's, the second's
    assert [r["source_offset"] for r in log.latest() if (r["group"], r["partition"]) == ("g0", 0)] == [99]


def test_a_table_written_with_the_hour_long_retention_keeps_its_properties_as_they_are(tmp_path):
    from deltalake import DeltaTable

    from dr_stream.runtime.delta_upkeep import properties, retention_interval

    assert retention_interval(3600) == "interval 1 hours" and retention_interval(90) == "interval 90 seconds"
    log = _log(tmp_path)
    log.append([row(0, 0, 1, 1)])
    log.compact()
    table = DeltaTable(str(tmp_path / "translations"))
    version = table.version()
    assert {k: table.metadata().configuration[k] for k in properties()} == properties()
    log.append([row(0, 0, 2, 2)])
    log.compact()
    # an append and a rewrite, and no commit that sets the properties again
    assert DeltaTable(str(tmp_path / "translations")).version() == version + 2
