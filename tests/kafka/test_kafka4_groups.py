"""The lines the share- and Streams-group helper JVM speaks (pure): requests with their values
encoded, answers parsed per group; and the helper itself on a secured cluster."""

from __future__ import annotations

import os
from urllib.parse import unquote

import pytest

from dr_stream.core.config import ClusterConfig
from dr_stream.kafka.group_offsets import Committed, GroupOffsetsError
from dr_stream.kafka.group_offsets.kafka4 import (
    Kafka4Groups,
    ShareGroupOffsets,
    connect_line,
    group_field,
    parse_share_offsets,
    parse_states,
)
from tests.clusters import SEC_PASSWORD_VARIABLE, scram
from tests.kafka_tools import create_topic, delete_groups, delete_topics, produce, unique


def test_a_connect_line_carries_each_java_property_with_its_value_encoded():
    line = connect_line("dc1", {"bootstrap.servers": "a:9092,b:9092",
                                "sasl.jaas.config": 'x required username="u" password="p\tq";'})
    fields = line.rstrip("\n").split("\t")
    assert fields[:2] == ["connect", "dc1"] and len(fields) == 4
    assert unquote(fields[3].split("=", 1)[1]) == 'x required username="u" password="p\tq";'


def test_a_group_id_with_a_tab_or_a_space_stays_one_field():
    assert "\t" not in group_field("odd\tgroup name") and unquote(group_field("odd\tgroup name")) == "odd\tgroup name"


def test_states_name_a_group_no_one_knows_absent_and_keep_other_errors():
    found = parse_states([["g1", "STABLE", "2"], ["g2", "DEAD", "0"], ["g3", "!", "GroupIdNotFoundException: no"],
                          ["g4", "!", "GroupAuthorizationException: not allowed"]], ["g1", "g2", "g3", "g4", "g5"])
    assert found["g1"] == ("STABLE", 2) and found["g2"] == ("ABSENT", 0) and found["g3"] == ("ABSENT", 0)
    assert isinstance(found["g4"], GroupOffsetsError) and "Authorization" in str(found["g4"])
    assert isinstance(found["g5"], GroupOffsetsError)  # not answered for: never taken as empty


def test_share_offsets_are_start_offsets_per_partition_and_a_failed_group_keeps_its_error():
    found = parse_share_offsets([["s%201", "t", "0", "40", ""], ["s%201", "t", "1", "77", ""], ["s2", "!", "Timeout"]],
                                ["s 1", "s2", "s3"])
    assert found["s 1"] == {("t", 0): Committed(40, ""), ("t", 1): Committed(77, "")}
    assert isinstance(found["s2"], GroupOffsetsError)
    assert found["s3"] == {}


@pytest.mark.integration
def test_the_helper_sets_and_reads_a_share_group_over_sasl_ssl_and_names_a_refused_principal(sec, pki):
    topic, group = unique("k4."), unique("k4-share-")
    create_topic(sec.bootstrap, topic, 1)
    produce(sec.bootstrap, topic, ({"value": b"x"} for _ in range(10)))
    password = os.environ[SEC_PASSWORD_VARIABLE]
    allowed = ClusterConfig("sec", sec.sasl_ssl_bootstrap, kafka=scram(pki, password=password))
    refused = ClusterConfig("sec-lp", sec.sasl_ssl_bootstrap, kafka=scram(pki, password=password, user="drs-lp"))
    helper = Kafka4Groups([allowed, refused])
    try:
        shares = ShareGroupOffsets(helper, allowed)
        assert shares.commit({group: {(topic, 0): 7}}, "") == {}
        assert shares.committed([group])[group] == {(topic, 0): Committed(7, "")}
        assert shares.states([group])[group] == ("EMPTY", 0)
        assert shares.listed()[group] == "EMPTY"
        failed = ShareGroupOffsets(helper, refused).commit({group: {(topic, 0): 3}}, "")
        assert "AuthorizationException" in str(failed[group]), failed
        assert shares.committed([group])[group] == {(topic, 0): Committed(7, "")}
    finally:
        helper.close()
        delete_groups(sec.bootstrap, [group])
        delete_topics(sec.bootstrap, [topic])
