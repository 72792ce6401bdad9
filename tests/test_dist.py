"""What the packed driver environment and the container image install."""

from __future__ import annotations

from dr_stream.runtime.dist import runtime_requirements
from dr_stream.runtime.paths import project_root


def test_the_driver_gets_every_runtime_dependency_but_the_pyspark_spark_provides(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\ndependencies = ["pyspark==4.2.0", "delta-spark==4.4.0", '
                         '"confluent-kafka==2.16.1", "pyyaml==6.0.3"]\n')
    normal, no_deps = runtime_requirements(pyproject)
    assert normal == ["confluent-kafka==2.16.1", "pyyaml==6.0.3"]
    assert no_deps == ["delta-spark==4.4.0"]  # it declares pyspark, so it goes in without dependencies


def test_the_projects_own_pins_reach_the_driver_unchanged():
    import tomllib

    declared = tomllib.loads((project_root() / "pyproject.toml").read_text())["project"]["dependencies"]
    normal, no_deps = runtime_requirements(project_root() / "pyproject.toml")
    assert sorted(normal + no_deps) == sorted(d for d in declared if not d.startswith("pyspark"))
