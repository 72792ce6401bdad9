"""The ACL mapping rule: what the destination gets for each source ACL, and why the rest is left out."""

from __future__ import annotations

from dr_stream.core.acl_mapping import Acl, map_acls
from dr_stream.core.policy import GroupFilter, TopicFilter, TopicRenamer

TOPICS = ["orders.eu", "orders.us", "payments", "local.only"]
GROUPS = ["billing", "shipping-1", "shipping-2"]
SELECTED = TopicFilter(("orders\\..*", "payments"), ())
ALL_GROUPS = GroupFilter((".*",), ())


def acl(kind: str, name: str, operation: str = "READ", pattern: str = "LITERAL", permission: str = "ALLOW",
        principal: str = "User:app") -> Acl:
    return Acl(kind, name, pattern, principal, "*", operation, permission)


def mapped(source: list[Acl], rename: str = "${topic}", write: bool = False, groups: GroupFilter = ALL_GROUPS):
    return map_acls(source, TOPICS, GROUPS, SELECTED, groups, TopicRenamer(rename), write)


def test_literal_and_prefixed_topic_acls_follow_a_rename_prefix():
    m = mapped([acl("TOPIC", "payments"), acl("TOPIC", "orders.", pattern="PREFIXED")], rename="dc1.${topic}")
    assert m.wanted == {acl("TOPIC", "dc1.payments"), acl("TOPIC", "dc1.orders.", pattern="PREFIXED")}
    assert m.left_out == ()


def test_acls_of_topics_the_flow_does_not_replicate_are_not_copied_nor_reported():
    m = mapped([acl("TOPIC", "local.only"), acl("TOPIC", "local.", pattern="PREFIXED"),
                acl("TOPIC", "local.only", "WRITE")])
    assert m.wanted == frozenset() and m.left_out == ()


def test_a_prefix_the_rename_cannot_express_is_reported_not_dropped():
    m = mapped([acl("TOPIC", "orders.", pattern="PREFIXED"), acl("TOPIC", "payments")], rename="${topic}.replica")
    assert m.wanted == {acl("TOPIC", "payments.replica")}
    [(left, why)] = m.unmappable
    assert left == acl("TOPIC", "orders.", pattern="PREFIXED")
    assert "adds a suffix: no prefix on the destination covers exactly the copies of orders.*" in why


def test_the_topic_wildcard_keeps_its_meaning_through_the_rename():
    assert mapped([acl("TOPIC", "*")]).wanted == {acl("TOPIC", "*")}
    assert mapped([acl("TOPIC", "*")], rename="dc1.${topic}").wanted == {acl("TOPIC", "dc1.", pattern="PREFIXED")}
    assert mapped([acl("TOPIC", "*")], rename="${topic}.replica").unmappable


def test_write_is_left_out_on_a_replica_and_all_narrows_to_reading():
    m = mapped([acl("TOPIC", "payments", "WRITE"), acl("TOPIC", "payments", "ALL")])
    assert m.wanted == {acl("TOPIC", "payments", op) for op in ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")}
    assert [why.split(" (")[0] for _, why in m.left_out] == ["ALL narrowed to READ, DESCRIBE, DESCRIBE_CONFIGS",
                                                            "WRITE left out"]
    assert m.unmappable == ()  # a setting (acls.write) brings them over: not a failure


def test_with_write_on_every_operation_is_copied_as_it_is():
    m = mapped([acl("TOPIC", "payments", "WRITE"), acl("TOPIC", "payments", "ALL")], write=True)
    assert m.wanted == {acl("TOPIC", "payments", "WRITE"), acl("TOPIC", "payments", "ALL")}


def test_deny_is_always_copied():
    assert mapped([acl("TOPIC", "payments", "WRITE", permission="DENY")]).wanted == {
        acl("TOPIC", "payments", "WRITE", permission="DENY")}


def test_group_acls_are_copied_for_the_translated_groups_only():
    source = [acl("GROUP", "billing"), acl("GROUP", "other"), acl("GROUP", "shipping-", pattern="PREFIXED"),
              acl("GROUP", "audit-", pattern="PREFIXED"), acl("GROUP", "*")]
    m = mapped(source, groups=GroupFilter(("billing", "shipping-.*"), ()))
    assert m.wanted == {acl("GROUP", "billing"), acl("GROUP", "shipping-", pattern="PREFIXED"), acl("GROUP", "*")}


def test_cluster_acls_are_not_the_flows_to_copy():
    assert mapped([acl("CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE")]).wanted == frozenset()
