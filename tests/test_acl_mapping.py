"""The ACL mapping rule: what the destination gets for each source ACL, and why the rest is left out."""

from __future__ import annotations

import itertools

from dr_stream.core.acl_mapping import Acl, map_acls, own_principal
from dr_stream.core.policy import GroupFilter, TopicFilter, TopicRenamer

TOPICS = ["orders.eu", "orders.us", "payments", "local.only", "__dr_stream_runs.f"]
GROUPS = ["billing", "shipping-1", "shipping-2", "audit-1"]
SELECTED = TopicFilter(("orders\\..*", "payments"), ())
ALL_GROUPS = GroupFilter((".*",), ())


def acl(kind: str, name: str, operation: str = "READ", pattern: str = "LITERAL", permission: str = "ALLOW",
        principal: str = "User:app") -> Acl:
    return Acl(kind, name, pattern, principal, "*", operation, permission)


def mapped(source: list[Acl], rename: str = "${topic}", write: bool = False, groups: GroupFilter = ALL_GROUPS,
           own: str | None = None):
    return map_acls(source, TOPICS, GROUPS, SELECTED, groups, TopicRenamer(rename), write, own)


def test_a_literal_topic_acl_follows_the_rename():
    m = mapped([acl("TOPIC", "payments")], rename="dc1.${topic}")
    assert m.wanted == {acl("TOPIC", "dc1.payments")} and m.left_out == ()


def test_a_prefixed_topic_acl_becomes_one_on_each_copy_it_covers_and_nothing_else_under_the_prefix():
    for rename, copies in (("${topic}", ["orders.eu", "orders.us"]),
                           ("dc1.${topic}", ["dc1.orders.eu", "dc1.orders.us"]),
                           ("${topic}.replica", ["orders.eu.replica", "orders.us.replica"])):
        m = mapped([acl("TOPIC", "orders.", pattern="PREFIXED")], rename=rename)
        assert m.wanted == {acl("TOPIC", name) for name in copies}, rename
        [(_, why)] = m.left_out
        assert why.startswith("granted on the names it covers that the flow copies only: ") and m.unmappable == ()


def test_the_topic_wildcard_grants_the_copies_only_never_uncopied_or_dr_streams_own_topics():
    for rename in ("${topic}", "dc1.${topic}", "${topic}.replica"):
        m = mapped([acl("TOPIC", "*")], rename=rename)
        copy = TopicRenamer(rename).format_remote_topic
        assert m.wanted == {acl("TOPIC", copy(t)) for t in ("orders.eu", "orders.us", "payments")}
        assert not any(a.name in ("*", "local.only") or a.name.startswith("__") for a in m.wanted)


def test_acls_of_topics_the_flow_does_not_replicate_are_not_copied_nor_reported():
    m = mapped([acl("TOPIC", "local.only"), acl("TOPIC", "local.", pattern="PREFIXED"),
                acl("TOPIC", "local.only", "WRITE"), acl("TOPIC", "__dr_stream_", pattern="PREFIXED")])
    assert m.wanted == frozenset() and m.left_out == ()


def test_write_is_left_out_on_a_replica_and_all_narrows_to_reading():
    m = mapped([acl("TOPIC", "payments", "WRITE"), acl("TOPIC", "payments", "ALL")])
    assert m.wanted == {acl("TOPIC", "payments", op) for op in ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")}
    assert [why.split(" (")[0] for _, why in m.left_out] == ["ALL narrowed to READ, DESCRIBE, DESCRIBE_CONFIGS",
                                                            "WRITE left out"]
    assert m.unmappable == ()  # a setting (acls.write) brings them over: not a failure


def test_with_write_on_every_operation_is_copied_as_it_is():
    m = mapped([acl("TOPIC", "payments", "WRITE"), acl("TOPIC", "payments", "ALL")], write=True)
    assert m.wanted == {acl("TOPIC", "payments", "WRITE"), acl("TOPIC", "payments", "ALL")}


def test_a_deny_of_another_principal_is_copied_on_the_names_an_allow_would_be():
    assert mapped([acl("TOPIC", "payments", "WRITE", permission="DENY")]).wanted == {
        acl("TOPIC", "payments", "WRITE", permission="DENY")}
    assert mapped([acl("TOPIC", "*", "READ", permission="DENY")]).wanted == {
        acl("TOPIC", t, "READ", permission="DENY") for t in ("orders.eu", "orders.us", "payments")}


def test_a_deny_of_the_flows_own_principal_is_refused_and_said():
    deny = acl("TOPIC", "orders.", "ALL", pattern="PREFIXED", permission="DENY", principal="User:dr-stream")
    m = mapped([deny, acl("TOPIC", "payments", principal="User:dr-stream")], own="User:dr-stream")
    assert m.wanted == {acl("TOPIC", "payments", principal="User:dr-stream")}  # its ALLOW is harmless
    [(left, why)] = m.refused
    assert left == deny and "the flow's own principal on the destination" in why
    assert m.unmappable == () and not m.copied(left, why)  # the applications lose nothing: drill stays green


def test_a_wildcard_principal_is_never_copied_and_is_reported():
    m = mapped([acl("TOPIC", "payments", principal="User:*"), acl("GROUP", "billing", principal="User:*"),
                acl("TOPIC", "payments", "READ", permission="DENY", principal="User:*")])
    assert m.wanted == frozenset()
    assert len(m.unmappable) == 3 and all("would name every principal of the destination" in w for _, w in m.unmappable)


def test_group_acls_are_copied_for_the_translated_groups_only_and_wildcards_name_each_of_them():
    source = [acl("GROUP", "billing"), acl("GROUP", "other"), acl("GROUP", "shipping-", pattern="PREFIXED"),
              acl("GROUP", "audit-", pattern="PREFIXED"), acl("GROUP", "*", "DESCRIBE")]
    m = mapped(source, groups=GroupFilter(("billing", "shipping-.*"), ()))
    assert m.wanted == {acl("GROUP", "billing"), acl("GROUP", "shipping-1"), acl("GROUP", "shipping-2"),
                        *(acl("GROUP", g, "DESCRIBE") for g in ("billing", "shipping-1", "shipping-2"))}


def test_whatever_the_source_holds_the_destination_is_granted_on_copies_and_translated_groups_only():
    def selected(a: Acl) -> bool:  # a copy of a topic the flow copies, or a group it translates
        if a.resource_type == "TOPIC":
            return a.name.startswith("dc1.") and SELECTED.matches(a.name.removeprefix("dc1."))
        return ALL_GROUPS.matches(a.name)

    names = ["*", "orders.", "orders.eu", "local.", "local.only", "__", "pay", "", "shipping-", "billing", "x"]
    source = [Acl(kind, name, pattern, principal, "*", op, permission)
              for kind, name, pattern, principal, op, permission in itertools.product(
                  ("TOPIC", "GROUP"), names, ("LITERAL", "PREFIXED"), ("User:app", "User:*", "User:dr-stream"),
                  ("READ", "ALL", "WRITE"), ("ALLOW", "DENY"))]
    m = map_acls(source, TOPICS, GROUPS, SELECTED, ALL_GROUPS, TopicRenamer("dc1.${topic}"), False, "User:dr-stream")
    assert m.wanted
    for a in m.wanted:
        assert a.pattern == "LITERAL" and a.name != "*" and selected(a), a
        assert a.principal == "User:app" or (a.principal == "User:dr-stream" and a.permission == "ALLOW"), a


def test_cluster_acls_are_not_the_flows_to_copy():
    assert mapped([acl("CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE")]).wanted == frozenset()


def test_the_flows_own_principal_is_the_one_given_else_its_sasl_username():
    scram = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                 'username="replicator" password="p";'}
    assert own_principal(scram, None) == "User:replicator"
    assert own_principal(scram, "User:CN=other") == "User:CN=other"
    assert own_principal({"security.protocol": "SSL"}, None) is None
    assert own_principal({}, None) is None
