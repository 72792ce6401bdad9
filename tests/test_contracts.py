"""The Python side of the contracts against the golden fixtures in tests/contracts/ (the JVM side
reads the same files: jvm/src/test/java/io/drstream/kafka/ContractsTest.java)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dr_stream.core import contracts
from dr_stream.core.policy import TopicRenamer
from dr_stream.core.provenance import entries, newest_entry
from dr_stream.index.destination_tail import runs_of_records
from dr_stream.index.run_store import Run
from dr_stream.index.runs_topic import parse_run
from dr_stream.positions.consumer_timestamps import GroupCommit

FIXTURES = Path(__file__).parent / "contracts"


def golden(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_every_internal_name_is_the_one_the_fixture_states():
    names = golden("names.json")
    said = {
        "provenance_header": contracts.PROVENANCE_HEADER,
        "consumer_timestamps_topic": contracts.CONSUMER_TIMESTAMPS_TOPIC,
        "runs_topic_prefix": contracts.RUNS_TOPIC_PREFIX, "lag_topic_prefix": contracts.LAG_TOPIC_PREFIX,
        "left_out_group_prefix": contracts.LEFT_OUT_GROUP_PREFIX,
        "sync_metadata_prefix": contracts.SYNC_METADATA_PREFIX,
        "copy_sink": contracts.COPY_SINK,
        "runs_topic_setting": contracts.RUNS_TOPIC_SETTING,
        "provenance_header_setting": contracts.PROVENANCE_HEADER_SETTING,
        "provenance_cluster_setting": contracts.PROVENANCE_CLUSTER_SETTING,
        "runs_hold_setting": contracts.RUNS_HOLD_SETTING,
        "rename_prefix_setting": contracts.RENAME_PREFIX_SETTING,
        "rename_suffix_setting": contracts.RENAME_SUFFIX_SETTING,
        "preserve_partitions_setting": contracts.PRESERVE_PARTITIONS_SETTING,
    }
    assert said == {k: v for k, v in names.items() if k != "_"}
    assert contracts.runs_topic("a-to-b") == names["runs_topic_prefix"] + "a-to-b"


@pytest.mark.parametrize("case", golden("runs_records.json")["written"], ids=lambda c: c["run"]["origin_topic"])
def test_a_run_the_jvm_writes_reads_back_as_that_run(case):
    assert parse_run(case["value"].encode()) == Run(**case["run"])


def test_a_run_without_timestamps_reads_with_none_and_a_malformed_one_not_at_all():
    fixture = golden("runs_records.json")
    run = parse_run(fixture["readable_without_timestamps"].encode())
    assert run is not None and (run.first_timestamp, run.last_timestamp, run.copied_at) == (None, None, None)
    assert [v for v in fixture["unreadable"] if parse_run(v.encode()) is not None] == []


@pytest.mark.parametrize("case", golden("provenance_header.json")["written"], ids=lambda c: c["entry"]["topic"])
def test_one_hop_writes_the_provenance_bytes_the_fixture_states(case):
    assert contracts.provenance_value(case["entry"]) == case["value"].encode()
    assert contracts.provenance_entry(case["value"].encode()) == case["entry"]


@pytest.mark.parametrize("case", golden("provenance_header.json")["read"], ids=lambda c: c["value"][:40])
def test_a_provenance_value_reads_as_the_entry_the_fixture_states(case):
    assert contracts.provenance_entry(case["value"].encode()) == case["entry"]
    headers = [("other", b"x"), (contracts.PROVENANCE_HEADER, case["value"].encode())]
    assert entries(headers, contracts.PROVENANCE_HEADER) == [case["entry"]]
    assert newest_entry(headers, contracts.PROVENANCE_HEADER) == case["entry"]


@pytest.mark.parametrize("case", golden("consumer_timestamps.json")["written"], ids=lambda c: c["position"]["group"])
def test_a_position_is_written_as_the_fixture_states(case):
    commit = GroupCommit(**case["position"])
    assert (commit.record_key(), commit.record_value()) == (case["key"].encode(), case["value"].encode())


@pytest.mark.parametrize("case", golden("copied_records.json")["cases"], ids=lambda c: c["name"])
def test_destination_records_make_the_runs_the_fixture_states(case):
    records = [(r["dest_topic"], r["dest_partition"], r["dest_offset"], r["timestamp"],
                [("other", b"x"), (contracts.PROVENANCE_HEADER, contracts.provenance_value(r["origin"]))])
               for r in case["records"]]
    runs = runs_of_records(records, contracts.PROVENANCE_HEADER, "src", TopicRenamer(case.get("rename", "${topic}")))
    got = sorted(tuple(getattr(run, m) for m in contracts.RUN_MEMBERS[:-1]) for run in runs)
    assert got == sorted(tuple(r[m] for m in contracts.RUN_MEMBERS[:-1]) for r in case["runs"])


def test_the_spark_columns_read_every_provenance_value_as_the_fixture_states(spark):
    from dr_stream.runtime.provenance_columns import HEADERS_TYPE, provenance_entries

    cases = golden("provenance_header.json")["read"]
    rows = [([(contracts.PROVENANCE_HEADER, c["value"].encode())],) for c in cases]
    frame = spark.createDataFrame(rows, f"headers {HEADERS_TYPE.simpleString()}")
    got = [r.e for r in frame.select(provenance_entries(contracts.PROVENANCE_HEADER).alias("e")).collect()]
    for case, entries_read in zip(cases, got, strict=True):
        expected = [] if case["entry"] is None else [
            {**case["entry"], "timestamp": -1 if case["entry"]["timestamp"] is None else case["entry"]["timestamp"]}]
        assert [e.asDict() for e in entries_read] == expected, case["value"]


def test_the_translate_query_reads_every_consumer_timestamps_record_as_the_fixture_states(spark):
    from dr_stream.positions.position_records import group_positions

    cases = golden("consumer_timestamps.json")["read"] + golden("consumer_timestamps.json")["written"]
    rows = [(c["key"].encode(), c["value"].encode(), 0, i) for i, c in enumerate(cases)]
    frame = spark.createDataFrame(rows, "key binary, value binary, partition int, offset long")
    got = frame.transform(group_positions).orderBy("record_offset").collect()
    for case, row in zip(cases, got, strict=True):
        assert (None if row.position is None else row.position.asDict()) == case["position"], case
        assert row.malformed == (case["position"] is None), case
