"""Many groups' committed offsets in a round: the text format both sides of the gateway speak (pure),
and the Java admin client in the driver's JVM against a real broker."""

from __future__ import annotations

import pytest

from dr_stream.kafka import clients
from dr_stream.kafka.group_offsets import Committed, GroupOffsetsError, commit_lines, parse_committed, parse_states
from dr_stream.kafka.group_offsets.consumer_groups import delete_group
from tests.kafka_tools import admin, create_topic, delete_topics, unique, wait_until


def test_committed_lines_become_each_group_s_offsets_with_their_metadata():
    text = "g1\tt\t0\t5\t\ng1\tt\t1\t7\tdr-stream:flow\ng2\tu\t3\t9\tapp\n"
    found = parse_committed(text, ["g1", "g2"])
    assert found["g1"] == {("t", 0): Committed(5, ""), ("t", 1): Committed(7, "dr-stream:flow")}
    assert found["g1"][("t", 1)].written_by_dr_stream
    assert found["g2"] == {("u", 3): Committed(9, "app")}


def test_a_group_with_no_committed_offsets_maps_to_an_empty_dict_not_to_nothing():
    assert parse_committed("", ["idle"]) == {"idle": {}}


def test_a_group_whose_fetch_failed_maps_to_its_error_never_to_no_offsets():
    found = parse_committed("g1\t!\tGroupAuthorizationException: not allowed\ng1\tt\t0\t5\t\n", ["g1"])
    assert isinstance(found["g1"], GroupOffsetsError)
    assert "GroupAuthorizationException" in str(found["g1"])


def test_commit_lines_are_one_per_group_and_partition_in_order():
    assert commit_lines({"b": {("t", 1): 4}, "a": {("t", 2): 9, ("t", 0): 3}}) == \
        "a\tt\t0\t3\na\tt\t2\t9\nb\tt\t1\t4\n"


def test_state_lines_become_each_group_s_state_and_a_group_no_one_knows_is_absent():
    text = ("g1\tSTABLE\t2\ng2\tEMPTY\t0\ng3\tDEAD\t0\n"
            "g4\t!\tGroupIdNotFoundException: Group g4 not found.\ng5\t!\tGroupAuthorizationException: no\n")
    found = parse_states(text, ["g1", "g2", "g3", "g4", "g5", "g6"])
    assert {g: found[g] for g in ("g1", "g2", "g3", "g4")} == {
        "g1": ("STABLE", 2), "g2": ("EMPTY", 0), "g3": ("ABSENT", 0), "g4": ("ABSENT", 0)}
    assert isinstance(found["g5"], GroupOffsetsError) and "GroupAuthorizationException" in str(found["g5"])
    assert isinstance(found["g6"], GroupOffsetsError), "a group the answer left out is not taken as absent"


@pytest.mark.integration
def test_states_of_many_groups_in_a_round_tell_a_consumed_group_from_an_empty_and_an_unknown_one(spark, dc1):
    from confluent_kafka import Consumer

    topic, empty, unknown, consumed = unique("states."), unique("states-empty-"), unique("states-none-"), \
        unique("states-live-")
    create_topic(dc1.bootstrap, topic, partitions=1)
    offsets = clients.group_offsets(dc1.config)
    consumer = Consumer({"bootstrap.servers": dc1.bootstrap, "group.id": consumed})
    try:
        assert offsets.commit({empty: {(topic, 0): 1}}, "app") == {}
        consumer.subscribe([topic])
        assert wait_until(lambda: consumer.poll(0.2) is None and bool(consumer.assignment()), 30)
        found = offsets.states([empty, unknown, consumed])
        assert found == {empty: ("EMPTY", 0), unknown: ("ABSENT", 0), consumed: ("STABLE", 1)}
    finally:
        consumer.close()
        offsets.close()
        for group in (empty, consumed):
            delete_group(admin(dc1.bootstrap), group)
        delete_topics(dc1.bootstrap, [topic])


@pytest.mark.integration
def test_a_changes_only_fetch_returns_each_offset_once_until_it_moves(spark, dc1):
    """Against a real broker, through the Java admin client in the test session's JVM."""
    group, topic = unique("changes-"), unique("changes.")
    create_topic(dc1.bootstrap, topic, partitions=2)
    offsets = clients.group_offsets(dc1.config)
    try:
        assert offsets.commit({group: {(topic, 0): 5, (topic, 1): 7}}, "app") == {}
        first = offsets.committed_changes([group])
        assert first == {group: {(topic, 0): Committed(5, "app"), (topic, 1): Committed(7, "app")}}
        assert offsets.committed_changes([group]) == {group: {}}  # nothing moved: nothing to parse
        assert offsets.commit({group: {(topic, 1): 9}}, "app") == {}
        assert offsets.committed_changes([group]) == {group: {(topic, 1): Committed(9, "app")}}
        assert offsets.committed([group])[group] == {(topic, 0): Committed(5, "app"), (topic, 1): Committed(9, "app")}
        # A round that no longer asks for the group forgets what it returned: asked again, all of it
        other = unique("changes-other-")
        assert offsets.committed_changes([other]) == {other: {}}
        assert offsets.committed_changes([group]) == {group: {(topic, 0): Committed(5, "app"),
                                                              (topic, 1): Committed(9, "app")}}
    finally:
        offsets.close()
        delete_group(admin(dc1.bootstrap), group)
        delete_topics(dc1.bootstrap, [topic])


@pytest.mark.integration
def test_a_round_of_many_groups_spread_over_several_writing_clients_commits_every_group(spark, dc1):
    groups, topic = [unique(f"spread-{i}-") for i in range(20)], unique("spread.")
    create_topic(dc1.bootstrap, topic, partitions=2)
    offsets = clients.group_offsets(dc1.config)
    try:
        wanted = {g: {(topic, 0): i, (topic, 1): 100 + i} for i, g in enumerate(groups)}
        assert offsets.commit(wanted, "dr-stream:spread") == {}
        found = offsets.committed(groups)
        assert {g: {k: c.offset for k, c in found[g].items()} for g in groups} == wanted
        assert all(c.metadata == "dr-stream:spread" for g in groups for c in found[g].values())
    finally:
        offsets.close()
        for group in groups:
            delete_group(admin(dc1.bootstrap), group)
        delete_topics(dc1.bootstrap, [topic])


@pytest.mark.integration
def test_a_position_committed_by_either_client_reads_back_as_the_same_text_through_the_other(spark, dc1, caplog):
    """The flow commits through the Java client and the command line reads through librdkafka,
    and the other way round: each side reads exactly the metadata the other wrote, many groups
    at once from several threads, and nothing is taken for a consumer's own commit."""
    from dr_stream.core.contracts import sync_metadata
    from dr_stream.kafka.group_offsets.consumer_groups import ConsumerGroupOffsets, commit_offsets

    groups, topic = [unique(f"meta-{i}-") for i in range(40)], unique("meta.")
    create_topic(dc1.bootstrap, topic, partitions=4)
    partitions = [(topic, p) for p in range(4)]
    metadata = sync_metadata("dc1-to-dc2", "9zQ3-Lk2SKuZ4tX0Vb8Rjg")
    java, librdkafka = clients.group_offsets(dc1.config), ConsumerGroupOffsets(dc1.config)
    try:
        wanted = {g: {tp: 10 * i + tp[1] for tp in partitions} for i, g in enumerate(groups)}
        assert java.commit(wanted, metadata) == {}
        for _ in range(5):
            read = librdkafka.committed(groups, partitions)
            assert read == {g: {tp: Committed(o, metadata) for tp, o in wanted[g].items()} for g in groups}
        assert "did not decode" not in caplog.text
        assert all(c.written_by_dr_stream and not c.taken_by(None) for g in groups for c in read[g].values())

        commit_offsets(dc1.config, groups[0], {(topic, 0): 7}, metadata)  # the command line's commit
        assert java.committed([groups[0]])[groups[0]][(topic, 0)] == Committed(7, metadata)
    finally:
        java.close()
        librdkafka.close()
        for group in groups:
            delete_group(admin(dc1.bootstrap), group)
        delete_topics(dc1.bootstrap, [topic])


def test_a_commit_names_the_cluster_its_position_was_translated_from():
    from dr_stream.core.contracts import sync_metadata, synced_from

    assert sync_metadata("dc1-to-dc2", "ID1") == "dr-stream:dc1-to-dc2@ID1"
    assert synced_from("dr-stream:dc1-to-dc2@ID1") == "ID1"
    assert synced_from("dr-stream:dc1-to-dc2") == ""  # before chains: origin unknown
    assert synced_from("app metadata") is None


def test_a_position_dr_stream_synced_is_passed_on_only_forward_and_never_back_where_it_came_from():
    own, from_dc1, unknown = Committed(5, "app"), Committed(5, "dr-stream:dc1-to-dc2@DC1"), Committed(5, "dr-stream:x")
    # the dc2 -> dc3 flow of a chain forwards (its destination is DC3)
    assert [c.taken_by("DC3") for c in (own, from_dc1, unknown)] == [True, True, False]
    # the dc2 -> dc1 flow of an active-active pair: never back to dc1
    assert [c.taken_by("DC1") for c in (own, from_dc1, unknown)] == [True, False, False]
    # a flow that does not forward (a mesh) takes only consumers' own commits
    assert [c.taken_by(None) for c in (own, from_dc1, unknown)] == [True, False, False]


def _sasl_ssl(sec, pki):
    from dr_stream.core.config import parse_flow
    from tests.clusters import scram

    return parse_flow({"source": {"alias": "gone", "bootstrap_servers": "127.0.0.1:1"},
                       "destination": {"alias": "sec", "bootstrap_servers": sec.sasl_ssl_bootstrap,
                                       "kafka": scram(pki)}}, "<test>").destination


@pytest.mark.integration
def test_a_command_s_round_of_many_groups_goes_through_one_batched_client_and_reads_as_a_consumer_each_would(
        sec, pki):
    """A consumer per group costs two TLS handshakes and a SCRAM exchange each on SASL_SSL, so a
    round of many groups goes through the Kafka 4 helper's batched Java client; what it commits
    and reads is what the consumers would have (the offsets, dr-stream's metadata)."""
    from dr_stream.core.contracts import sync_metadata
    from dr_stream.kafka.group_offsets.consumer_groups import BATCHED_FROM, ConsumerGroupOffsets, committed_offsets
    from tests.kafka_tools import delete_groups

    cluster = _sasl_ssl(sec, pki)
    topic = unique("batched.")
    create_topic(sec.bootstrap, topic, partitions=2)
    groups = [unique("batched-") for _ in range(BATCHED_FROM)]
    partitions = [(topic, 0), (topic, 1)]
    offsets = ConsumerGroupOffsets(cluster)
    try:
        offsets.expect(len(groups))
        wanted = {g: {(topic, 0): i, (topic, 1): i + 7} for i, g in enumerate(groups)}
        metadata = sync_metadata("batched", "origin-cluster")
        assert offsets.commit(wanted, metadata) == {}
        helper = offsets._helper
        assert helper is not None and helper._process is not None, "the round went through the helper"
        read = offsets.committed(groups, partitions)
        assert {g: {k: c.offset for k, c in found.items()} for g, found in read.items()} == wanted
        # only the partitions asked, as a consumer reads them, though the Java client reads all
        assert {g: set(f) for g, f in offsets.committed(groups, [(topic, 1)]).items()} == \
            {g: {(topic, 1)} for g in groups}
        assert all(c.metadata == metadata for found in read.values() for c in found.values())
        # a consumer of the group reads the same text the batched client wrote, and vice versa
        assert committed_offsets(cluster, groups[0], partitions) == read[groups[0]]
        few = offsets.committed(groups[:2], partitions)  # below BATCHED_FROM: a consumer each
        assert few == {g: read[g] for g in groups[:2]}
    finally:
        offsets.close()
        delete_groups(sec.bootstrap, groups)
        delete_topics(sec.bootstrap, [topic])
    assert offsets._helper is None and helper._process is None, "close stops the helper's JVM"


@pytest.mark.integration
def test_where_the_helper_cannot_start_a_round_of_many_groups_goes_through_consumers_and_says_so_once(
        dc1, monkeypatch):
    import logging

    from dr_stream.kafka.group_offsets.consumer_groups import BATCHED_FROM, ConsumerGroupOffsets
    from tests.kafka_tools import delete_groups

    monkeypatch.setenv("JAVA_HOME", "/nonexistent-jdk")  # a host without Java
    topic = unique("nojdk.")
    create_topic(dc1.bootstrap, topic, partitions=1)
    groups = [unique("nojdk-") for _ in range(BATCHED_FROM)]
    offsets = ConsumerGroupOffsets(dc1.config)
    # heard on the module's own logger: a command's log set-up may keep dr-stream's lines from the root
    lines: list[str] = []
    heard = logging.Handler(logging.WARNING)
    heard.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("dr_stream.kafka.group_offsets.consumer_groups")
    logger.addHandler(heard)
    try:
        assert offsets.commit({g: {(topic, 0): 3} for g in groups}, "app") == {}
        read = offsets.committed(groups, [(topic, 0)])
        assert {g: {k: c.offset for k, c in found.items()} for g, found in read.items()} == \
            {g: {(topic, 0): 3} for g in groups}
        said = [line for line in lines if "Kafka 4 helper did not serve them" in line]
        assert len(said) == 1 and said[0].startswith(f"dc1: {BATCHED_FROM} groups' offsets go through a consumer "
                                                     "each"), lines
    finally:
        logger.removeHandler(heard)
        offsets.close()
        delete_groups(dc1.bootstrap, groups)
        delete_topics(dc1.bootstrap, [topic])
