"""State paths go through Hadoop's FileSystem: local paths, file: URIs and relative paths alike."""

from __future__ import annotations

from dr_stream.runtime.state_paths import move_aside


def test_a_state_directory_given_as_a_file_uri_is_moved_aside_beside_itself(spark, tmp_path):
    state = tmp_path / "flow" / "checkpoints"
    (state / "replicate").mkdir(parents=True)
    (state / "replicate" / "metadata").write_text("{}")
    uri = state.as_uri()

    moved = move_aside(spark, uri, "before-1")

    assert moved == f"file:{tmp_path}/flow/checkpoints.before-1"
    assert not state.exists()
    assert (tmp_path / "flow" / "checkpoints.before-1" / "replicate" / "metadata").read_text() == "{}"


def test_nothing_to_move_is_none_and_a_trailing_slash_is_the_same_path(spark, tmp_path):
    assert move_aside(spark, str(tmp_path / "absent"), "x") is None
    (tmp_path / "index").mkdir()
    assert move_aside(spark, f"{tmp_path}/index/", "old") == f"file:{tmp_path}/index.old"


def _flow(**streaming):
    from dr_stream.core.config import parse_flow

    return parse_flow({"name": "f", "source": {"alias": "a", "bootstrap_servers": "h:1"},
                       "destination": {"alias": "b", "bootstrap_servers": "h:2"}, "streaming": streaming}, "flow.yaml")


def test_uris_and_absolute_paths_are_not_relative_but_a_bare_path_is():
    from dr_stream.runtime.state_paths import is_relative

    for uri in ("hdfs://nn:8020/x", "hdfs:///x", "s3a://bucket/x", "abfss://c@acct.dfs.core.windows.net/x",
                "file:/tmp/x", "file:///tmp/x", "/mnt/shared/x"):
        assert not is_relative(uri), uri
    for path in (".cache/flows/f/checkpoints", "state", "./state"):
        assert is_relative(path), path


def test_cluster_mode_refuses_the_first_relative_state_path_naming_its_key():
    import pytest

    from dr_stream.core.config import ConfigError
    from dr_stream.runtime.state_paths import require_shared

    require_shared(_flow(checkpoint_dir="hdfs:///f/c", offset_index="s3a://b/f/index"))  # translations beside it
    with pytest.raises(ConfigError, match=r"^flow\.yaml: streaming\.checkpoint_dir: '\.cache/flows/f/checkpoints' "
                                          r"is a relative path; in cluster deploy mode"):
        require_shared(_flow())
    with pytest.raises(ConfigError, match=r"streaming\.translations: 'rel/t' is a relative path"):
        require_shared(_flow(checkpoint_dir="hdfs:///c", offset_index="hdfs:///i", translations="rel/t"))


def test_the_translations_table_defaults_beside_an_object_store_index():
    flow = _flow(checkpoint_dir="s3a://b/x/checkpoints", offset_index="s3a://b/x/offset-index")
    assert flow.streaming.translations == "s3a://b/x/translations"
