"""status for alerting: which partitions and groups are past the operator's limits (pure), and
the exit codes a cron job or probe acts on (real brokers)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from dr_stream.operations.status import PartitionLag, Thresholds, TranslationAge, over_thresholds
from dr_stream.runtime.paths import project_root
from tests.kafka_tools import create_topic, delete_topics, produce, unique

LAGS = [PartitionLag("t", 0, 100, 89, 10, 4.0), PartitionLag("t", 1, 50, 49, 0, 0.0),
        PartitionLag("u", 0, None, 7, None, None)]
AGES = [TranslationAge("g", "t", 0, 40, 40, "exact", "committed", 30.0),
        TranslationAge("idle", "t", 1, 5, 5, "exact", "committed", 900.0)]


def test_no_limits_means_nothing_is_over():
    assert over_thresholds(LAGS, AGES, Thresholds()) == []


def test_lag_limits_name_each_partition_over_them_and_skip_what_is_unknown():
    assert over_thresholds(LAGS, AGES, Thresholds(max_lag_records=5, max_lag_seconds=3)) == [
        "t[0]: lag 10 records > 5", "t[0]: lag 4.0 s > 3 s"]
    assert over_thresholds(LAGS, AGES, Thresholds(max_lag_records=10, max_lag_seconds=4)) == []


def test_a_translation_is_stale_only_when_the_group_moved_on_the_source_since():
    limits = Thresholds(max_translation_age=60)
    moved = {("g", "t", 0): 40, ("idle", "t", 1): 9}
    assert over_thresholds(LAGS, AGES, limits, moved) == [
        "group idle t[1]: committed at 9 on the source, last translated at 5 900.0 s ago > 60 s"]
    assert over_thresholds(LAGS, AGES, limits, {("g", "t", 0): 40, ("idle", "t", 1): 5}) == []
    assert over_thresholds(LAGS, AGES, limits, None) == []  # source down: not judged


@pytest.mark.integration
def test_status_exits_0_within_limits_2_over_them_and_3_when_a_cluster_does_not_answer(dc1, dc2, tmp_path):
    topic = unique("alert.")
    create_topic(dc1.bootstrap, topic, partitions=1)
    produce(dc1.bootstrap, topic, ({"value": b"x"} for _ in range(100)))  # no flow copies it: lag 100

    def status(destination: str, *limits: str) -> subprocess.CompletedProcess:
        path = tmp_path / "flow.yaml"
        path.write_text(yaml.safe_dump({
            "name": "alerts", "source": {"alias": "dc1", "bootstrap_servers": dc1.bootstrap},
            "destination": {"alias": "dc2", "bootstrap_servers": destination},
            "topics": {"include": [topic]},
            "streaming": {"checkpoint_dir": str(tmp_path / "cp"), "offset_index": str(tmp_path / "index")}}))
        return subprocess.run([sys.executable, "-m", "dr_stream.cli", "status", "--config", str(path), *limits],
                              capture_output=True, text=True, timeout=180, cwd=project_root())

    try:
        within = status(dc2.bootstrap, "--max-lag-records", "1000")
        assert within.returncode == 0, within.stderr[-2000:]
        over = status(dc2.bootstrap, "--max-lag-records", "10")
        assert over.returncode == 2, over.stderr[-2000:]
        assert f"dr-stream: status: {topic}[0]: lag 100 records > 10" in over.stderr.splitlines()
        down = status("127.0.0.1:1", "--max-lag-records", "10")
        assert down.returncode == 3, down.stderr[-2000:]
        assert "dr-stream: status: dc2 does not answer" in down.stderr.splitlines()
    finally:
        delete_topics(dc1.bootstrap, [topic])
