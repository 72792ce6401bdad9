"""State paths go through Hadoop's FileSystem: local paths, file: URIs and relative paths alike."""

from __future__ import annotations

from dr_stream.state_paths import move_aside


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
