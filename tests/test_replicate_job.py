"""jobs/replicate.py finds its flow file wherever the deploy mode put it."""

from __future__ import annotations

import importlib.util

from dr_stream.runtime.paths import project_root


def _job():
    spec = importlib.util.spec_from_file_location("replicate_job", project_root() / "jobs" / "replicate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_flow_file_is_taken_at_its_path_when_it_exists(tmp_path):
    flow = tmp_path / "flow.yaml"
    flow.write_text("x: 1\n")
    assert _job()._with_flow_file(["--config", str(flow)]) == ["--config", str(flow)]


def test_a_flow_file_in_the_working_directory_is_found_by_its_base_name(tmp_path, monkeypatch):
    (tmp_path / "shipped.yaml").write_text("x: 1\n")
    monkeypatch.chdir(tmp_path)
    assert _job()._flow_file("/on/the/submitting/machine/shipped.yaml") == "shipped.yaml"


def test_a_flow_file_shipped_to_spark_files_is_found_there(spark, tmp_path, monkeypatch):
    shipped = tmp_path / "via-spark-files.yaml"
    shipped.write_text("x: 1\n")
    spark.sparkContext.addFile(str(shipped))
    monkeypatch.chdir(tmp_path / "..")
    found = _job()._flow_file("/elsewhere/via-spark-files.yaml")
    assert found != str(shipped) and found.endswith("/via-spark-files.yaml")
    with open(found) as f:
        assert f.read() == "x: 1\n"
