"""Topic selection and renaming (the same rule for the driver and for Spark), and group selection."""

from __future__ import annotations

import pytest

from dr_stream.core.policy import GroupFilter, TopicFilter, TopicRenamer


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        ("orders", True),
        ("orders.replica", False),  # whole-name match: no substring pick-up
        ("xorders", False),
        ("payments.eu", True),
        ("payments.test", False),  # excluded
        ("__consumer_offsets", False),
        ("__consumer_timestamps", False),
        ("connect-offsets", False),
        ("mm2-offset-syncs.dc2.internal", False),
    ],
)
def test_filter_matches_whole_names_and_leaves_internal_topics_out(topic, expected):
    f = TopicFilter(include=("orders", r"payments\..*"), exclude=(r"payments\.test",))
    assert f.matches(topic) is expected


def test_internal_topic_is_replicated_only_when_named_exactly():
    assert not TopicFilter(include=(".*",)).matches("_schemas")
    assert TopicFilter(include=(".*", "_schemas")).matches("_schemas")
    assert not TopicFilter(include=("_schemas",), exclude=("_schemas",)).matches("_schemas")


def test_subscribe_pattern_is_anchored_for_spark():
    pattern = TopicFilter(include=("orders",)).subscribe_pattern()
    assert pattern.startswith("^") and pattern.endswith("$")


def test_empty_include_matches_nothing():
    assert not TopicFilter(include=()).matches("orders")


def test_renamer_formats_remote_topic():
    assert TopicRenamer("dc1.${topic}").format_remote_topic("orders") == "dc1.orders"
    assert TopicRenamer("${topic}.replica").format_remote_topic("orders") == "orders.replica"
    assert TopicRenamer().is_identity()
    with pytest.raises(ValueError):
        TopicRenamer("no-placeholder")


class TestGroupFilter:
    def test_included_groups_match_and_replicator_groups_never_do(self):
        groups = GroupFilter(("app-.*", "spark-kafka-x"), ("app-test",))
        assert groups.matches("app-orders")
        assert not groups.matches("app-test")
        assert not groups.matches("spark-kafka-x")
        assert not groups.matches("other")


def test_a_filter_answers_a_name_the_same_each_time_and_still_equals_a_fresh_filter():
    """Filters remember their answers (a name comes back with each partition, round after round);
    what they remember is not part of what they are."""
    groups, topics = GroupFilter(("app-.*",), ("app-x",)), TopicFilter(("orders.*",), ("orders-test",))
    names = ("app-a", "app-x", "dr-stream-flow", "other")
    assert [groups.matches(g) for g in names * 2] == [True, False, False, False] * 2
    assert [topics.matches(t) for t in ("orders", "orders-test", "orders") ] == [True, False, True]
    assert groups == GroupFilter(("app-.*",), ("app-x",)) and hash(groups) == hash(GroupFilter(("app-.*",), ("app-x",)))
    assert topics == TopicFilter(("orders.*",), ("orders-test",))
