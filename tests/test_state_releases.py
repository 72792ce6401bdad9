"""The releases that wrote a flow's state: recorded at a start when the running one is new to the
state, and a state of a newer format than the running code reads refused in one line, before any
cluster is compared (a real Delta table through delta-rs on local disk)."""

from __future__ import annotations

import pytest

from dr_stream import __version__
from dr_stream.runtime.delta_appends import DeltaAppends
from dr_stream.runtime.delta_reads import DeltaReads
from dr_stream.runtime.recorded_clusters import RecordedClusters
from dr_stream.runtime.state_releases import (
    STATE_FORMAT,
    IncompatibleState,
    Release,
    StateReleases,
    newest_of,
    refusal,
    schema,
    to_record,
)


def test_a_state_of_a_newer_format_is_refused_in_one_line_naming_file_key_writer_and_way_out():
    line = refusal(Release(2, "0.3.0", 5), "conf/f.yaml", "s/ck/releases", reads=1, running="0.2.0")
    assert line is not None and "\n" not in line
    assert line.startswith("conf/f.yaml: streaming.checkpoint_dir: the flow's state (s/ck/releases) was written by "
                           "dr-stream 0.3.0 in state format 2; dr-stream 0.2.0 reads format 1 and older")
    assert "dr-stream reset-flow --config conf/f.yaml" in line


def test_a_state_of_the_same_or_an_older_format_or_with_no_record_is_read():
    assert refusal(None, "f", "w") is None
    assert refusal(Release(1, "0.1.0", 5), "f", "w", reads=2) is None
    assert refusal(Release(STATE_FORMAT, "x", 5), "f", "w") is None


def test_a_start_records_its_release_only_when_it_is_not_the_newest_recorded():
    assert to_record(None)
    assert not to_record(Release(STATE_FORMAT, __version__, 5))
    assert to_record(Release(STATE_FORMAT, "0.0.9", 5))  # an upgrade
    assert newest_of([{"state_format": 1, "version": "0.1.0", "written_at_ms": 10},
                      {"state_format": 1, "version": "0.2.0", "written_at_ms": 20}]) == Release(1, "0.2.0", 20)
    assert newest_of([]) is None


def _releases(tmp_path) -> StateReleases:
    return StateReleases(str(tmp_path / "ck" / "releases"), "conf/f.yaml", DeltaReads(None))


def test_a_first_start_records_the_running_release_and_a_second_adds_nothing(tmp_path):
    recorded = _releases(tmp_path).record()
    assert recorded is not None and (recorded.state_format, recorded.version) == (STATE_FORMAT, __version__)
    again = _releases(tmp_path)
    assert again.newest() is not None and again.newest().version == __version__
    assert again.record() is None
    assert len(DeltaReads(None).query(again.path, "SELECT * FROM t")) == 1


def test_every_use_of_a_state_a_newer_release_wrote_is_refused_before_a_cluster_is_compared(tmp_path):
    releases = _releases(tmp_path)
    DeltaAppends().append(releases.path, schema(), [(STATE_FORMAT + 1, "9.0.0", 1)], lambda: None)
    record = RecordedClusters(str(tmp_path / "ck" / "clusters"), "conf/f.yaml", DeltaReads(None), None,
                              _releases(tmp_path))
    with pytest.raises(IncompatibleState, match=rf"written by dr-stream 9\.0\.0 in state format {STATE_FORMAT + 1}"):
        record.check("source", "dc1", "id-1")
    with pytest.raises(IncompatibleState):
        _releases(tmp_path).record()
    assert len(DeltaReads(None).query(releases.path, "SELECT * FROM t")) == 1  # nothing appended
