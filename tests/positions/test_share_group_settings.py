"""A share group's own settings made on the destination as on the source (pure): exactly the
`share.*` configs the source group set, deleted where only the destination set them, never while
the destination group has members, and each outcome said once."""

from __future__ import annotations

from dr_stream.kafka.group_offsets import GroupOffsetsError
from dr_stream.positions.share_group_settings import ShareGroupSettings, settings_changes, settings_line


def test_the_destination_gets_the_source_groups_share_settings_and_loses_those_the_source_never_set():
    source = {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed",
              "consumer.session.timeout.ms": "45000"}
    destination = {"share.isolation.level": "read_committed", "share.record.lock.duration.ms": "15000"}
    assert settings_changes(source, destination) == ({"share.auto.offset.reset": "earliest"},
                                                     ["share.record.lock.duration.ms"])
    assert settings_changes(source, {**destination, "share.auto.offset.reset": "earliest"}) == \
        ({}, ["share.record.lock.duration.ms"])
    assert settings_changes({"share.auto.offset.reset": "by_duration:PT1H"}, {"share.auto.offset.reset": "latest"}) \
        == ({"share.auto.offset.reset": "by_duration:PT1H"}, [])
    assert settings_changes({}, {}) == ({}, [])


def test_the_settings_line_names_each_setting_and_each_one_put_back_to_its_default():
    assert settings_line("g", "dc2", {"share.auto.offset.reset": "earliest"}, ["share.isolation.level"]) == \
        "share group g: settings made as on the source on dc2: share.auto.offset.reset=earliest, " \
        "share.isolation.level back to its default"


class _Groups:
    def __init__(self, configs: dict, states: dict | None = None) -> None:
        self.config, self.state = configs, states or {}
        self.altered: list[tuple] = []
        self.refuse: Exception | None = None

    def configs(self, groups):
        return {g: self.config.get(g, {}) for g in groups}

    def states(self, groups):
        return {g: self.state.get(g, ("ABSENT", 0)) for g in groups}

    def alter_configs(self, group, set_to, delete):
        if self.refuse:
            return self.refuse
        self.altered.append((group, dict(set_to), list(delete)))
        self.config[group] = {**{k: v for k, v in self.config.get(group, {}).items() if k not in delete}, **set_to}
        return None


def settings(source: _Groups, destination: _Groups, lines: list[str]) -> ShareGroupSettings:
    return ShareGroupSettings(source, destination, "dc2", 5, lines.append)  # type: ignore[arg-type]


def test_settings_are_set_once_and_read_on_the_destination_again_only_when_the_source_changes_them():
    source, destination, lines = _Groups({"g": {"share.auto.offset.reset": "earliest"}}), _Groups({}), []
    sync = settings(source, destination, lines)
    sync.round(["g", "quiet"])
    sync.round(["g", "quiet"])
    assert destination.altered == [("g", {"share.auto.offset.reset": "earliest"}, [])]
    assert lines == ["share group g: settings made as on the source on dc2: share.auto.offset.reset=earliest"]
    source.config["g"] = {}
    sync.round(["g"])
    assert destination.altered[-1] == ("g", {}, ["share.auto.offset.reset"]) and destination.config["g"] == {}


def test_a_group_with_members_on_the_destination_is_left_alone_said_once_and_set_once_it_empties():
    source = _Groups({"g": {"share.auto.offset.reset": "earliest"}})
    destination, lines = _Groups({}, {"g": ("STABLE", 2)}), []
    sync = settings(source, destination, lines)
    assert sync.round(["g"]) == 1 and sync.round(["g"]) == 1, "counted every round it is left alone"
    assert destination.altered == []
    assert lines == ["share group g: settings not made as on the source on dc2: group is STABLE on the destination "
                     "(tried again every 5 s)"]
    destination.state["g"] = ("EMPTY", 0)
    assert sync.round(["g"]) == 0
    assert destination.config["g"] == {"share.auto.offset.reset": "earliest"}
    assert lines[-1] == "share group g: settings made as on the source on dc2 again"


def test_a_refused_setting_is_said_and_tried_again_next_round():
    source, destination, lines = _Groups({"g": {"share.auto.offset.reset": "earliest"}}), _Groups({}), []
    destination.refuse = GroupOffsetsError("GroupAuthorizationException: not authorized")
    sync = settings(source, destination, lines)
    sync.round(["g"])
    destination.refuse = None
    sync.round(["g"])
    assert destination.config["g"] == {"share.auto.offset.reset": "earliest"}
    assert lines[0].endswith("GroupAuthorizationException: not authorized (tried again every 5 s)"), lines


def test_a_group_the_source_no_longer_lists_leaves_nothing_kept_and_is_never_said_recovered():
    source = _Groups({"g": {"share.auto.offset.reset": "earliest"}, "h": {"share.auto.offset.reset": "latest"}})
    destination, lines = _Groups({}, {"h": ("STABLE", 1)}), []
    sync = settings(source, destination, lines)
    assert sync.round(["g", "h"]) == 1
    assert set(sync._equal) == {"g"} and sync._failures.subjects == {"h"}
    assert sync.round(["g"]) == 0  # h was deleted on the source
    assert set(sync._equal) == {"g"} and not sync._failures.subjects
    sync.round([])
    assert not sync._equal
    assert not any(line.endswith("on dc2 again") for line in lines)
