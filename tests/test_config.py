"""Flow config: every mistake is one line naming the file and the key path."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dr_stream.core.config import ConfigError, load_flow, parse_flow

BASE = {
    "source": {"alias": "dc1", "bootstrap_servers": "127.0.0.1:19092"},
    "destination": {"alias": "dc2", "bootstrap_servers": "127.0.0.1:29092"},
}


def with_(**sections):
    raw = {k: dict(v) for k, v in BASE.items()}
    for key, value in sections.items():
        raw[key] = value if not isinstance(value, dict) else {**raw.get(key, {}), **value}
    return raw


def test_defaults_follow_the_design():
    config = parse_flow(with_(), "f.yaml")
    assert config.name == "dc1-to-dc2"
    assert config.topics.rename == "${topic}" and config.topics.preserve_partitions
    assert config.provenance.header == "__replicator_id"
    assert config.streaming.checkpoint_dir == ".cache/flows/dc1-to-dc2/checkpoints"
    assert config.streaming.trigger_interval == "1000 milliseconds"
    assert config.streaming.resume_scan_timeout_s == 60.0
    assert config.streaming.max_trigger_s == 30.0
    assert config.offsets.positions_from == "__consumer_offsets"
    assert (config.drill.rpo_s, config.drill.max_translation_age_s, config.drill.interval_s) == (60.0, 60.0, None)
    assert config.drill.losses_since_s == 7 * 24 * 3600.0
    # the ledger of losses sits beside the offset index, wherever that is
    assert config.streaming.losses == ".cache/flows/dc1-to-dc2/losses"
    assert parse_flow(with_(streaming={"offset_index": "s3a://b/dr/idx"}), "f.yaml").streaming.losses == "s3a://b/dr/losses"
    assert not config.offsets.share_groups.enabled  # share groups are synced only when named


def test_share_groups_are_selected_by_regex_and_internal_groups_never():
    selected = parse_flow(with_(offsets={"share_groups": {"include": ["orders-.*", "dr-stream-.*"],
                                                          "exclude": ["orders-test"], "interval": "2s"}}),
                          "f.yaml").offsets.share_groups
    assert selected.enabled and selected.interval_s == 2.0
    chosen = selected.filter
    assert chosen.matches("orders-eu") and not chosen.matches("orders-test") and not chosen.matches("dr-stream-x")


def test_the_drill_keys_take_durations_up_to_days():
    drill = parse_flow(with_(drill={"rpo": "30s", "max_translation_age": "2m", "interval": "1h",
                                    "losses_since": "2d"}), "f.yaml").drill
    assert (drill.rpo_s, drill.max_translation_age_s, drill.interval_s) == (30.0, 120.0, 3600.0)
    assert drill.losses_since_s == 2 * 24 * 3600.0


def test_the_drill_lists_spark_checkpoints_as_uris_and_none_by_default(monkeypatch):
    monkeypatch.setenv("DR_TEST_CK_ROOT", "hdfs://nn:8020/ck")
    listed = parse_flow(with_(drill={"spark_checkpoints": ["${env:DR_TEST_CK_ROOT}/orders", "/mnt/ck/q"]}), "f.yaml")
    assert listed.drill.spark_checkpoints == ("hdfs://nn:8020/ck/orders", "/mnt/ck/q")
    assert parse_flow(with_(), "f.yaml").drill.spark_checkpoints == ()
    with pytest.raises(ConfigError, match=r"^f.yaml: drill.spark_checkpoints: expected a list of strings, got 'x'$"):
        parse_flow(with_(drill={"spark_checkpoints": "x"}), "f.yaml")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (with_(topics={"includes": ["x"]}), "f.yaml: topics.includes: unknown key"),
        (with_(bogus=1), "f.yaml: bogus: unknown key"),
        (with_(topics={"preserve_partitions": "yes"}), "f.yaml: topics.preserve_partitions: expected true or false"),
        (with_(topics={"include": ["orders("]}), "f.yaml: topics.include[0]: invalid regex"),
        (with_(provenance={"filter_overrides": [{"cluster": "[", "topic": "x"}]}),
         "f.yaml: provenance.filter_overrides[0].cluster: invalid regex"),
        (with_(source={"bootstrap_servers": ""}), "f.yaml: source.bootstrap_servers: is required"),
        (with_(source={"bootstrap_servers": "http://x"}),
         "f.yaml: source.bootstrap_servers: 'http://x' is not host:port"),
        (with_(source={"bootstrap_servers": "host:abc"}),
         "f.yaml: source.bootstrap_servers: 'host:abc' is not host:port"),
        (with_(destination={"bootstrap_servers": "a:9092,host:99999"}),
         "f.yaml: destination.bootstrap_servers: 'host:99999': port 99999 is not 1-65535"),
        (with_(destination={"bootstrap_servers": "a:9092,,b:9092"}),
         "f.yaml: destination.bootstrap_servers: 'a:9092,,b:9092' has an empty entry"),
        (with_(streaming={"max_records_per_batch": 0}), "f.yaml: streaming.max_records_per_batch: expected an integer"),
        (with_(streaming={"trigger": "soon"}), "f.yaml: streaming.trigger:"),
        (with_(streaming={"resume_scan_timeout": "forever"}), "f.yaml: streaming.resume_scan_timeout: 'forever'"),
        (with_(streaming={"trigger": "2s", "max_trigger": "1s"}),
         "f.yaml: streaming.max_trigger: '1s' is not a duration at least as long as the trigger (2s)"),
        (with_(offsets={"positions_from": "zookeeper"}),
         "f.yaml: offsets.positions_from: expected __consumer_offsets or admin, got 'zookeeper'"),
        (with_(topics={"rename": "dc1.topic"}), "f.yaml: topics.rename:"),
        (with_(destination={"alias": "dc1"}), "f.yaml: destination.alias: is the same as source.alias"),
        (with_(source={"kafka": {"sasl.password": "${env:DR_STREAM_UNSET_FOR_TEST}"}}),
         "f.yaml: source.kafka.sasl.password: environment variable DR_STREAM_UNSET_FOR_TEST is not set"),
        (with_(destination={"kafka": {"security.protocol": "SASL_SSL"}}),
         "f.yaml: destination.kafka.sasl.mechanism: GSSAPI (Kerberos) is not available"),
        (with_(destination={"kafka": {"security.protocol": "SSL", "ssl.keystore.location": "/k.jks"}}),
         "f.yaml: destination.kafka.ssl.keystore.type: a JKS keystore's private key cannot be read"),
        (with_(source={"librdkafka": {"debug": ["all"]}}), "f.yaml: source.librdkafka.debug: expected a scalar value"),
        (with_(drill={"rpo": "0s"}), "f.yaml: drill.rpo: must be longer than 0s"),
        (with_(drill={"interval": "10s"}), "f.yaml: drill.interval: 10s is shorter than 60s"),
        (with_(drill={"every": "1h"}), "f.yaml: drill.every: unknown key"),
        (with_(offsets={"share_groups": {"interval": "500ms", "include": ["s"]}}),
         "f.yaml: offsets.share_groups.interval: 0.5s is shorter than 1s"),
        (with_(offsets={"share_groups": {"include": ["("]}}), "f.yaml: offsets.share_groups.include[0]: invalid regex"),
    ],
)
def test_each_mistake_is_one_line_naming_file_and_key(raw, message):
    with pytest.raises(ConfigError) as error:
        parse_flow(raw, "f.yaml")
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("servers", ["127.0.0.1:19092", "a.example.com:9092, b.example.com:9092", "[::1]:9092",
                                     "SASL_SSL://kafka-0.kafka.svc:9093", "kafka_1:9092"])
def test_a_bootstrap_list_of_host_port_entries_is_taken_as_written(servers):
    assert parse_flow(with_(source={"bootstrap_servers": servers}), "f.yaml").source.bootstrap_servers == servers


def test_a_bootstrap_list_from_the_environment_is_checked_without_echoing_it(monkeypatch):
    monkeypatch.setenv("DR_TEST_HOST", "not-a-host-port")
    with pytest.raises(ConfigError) as error:
        parse_flow(with_(source={"bootstrap_servers": "${env:DR_TEST_HOST}"}), "f.yaml")
    assert str(error.value) == ("f.yaml: source.bootstrap_servers: '${env:DR_TEST_HOST}' expands to a list that is "
                                "not host:port,...")


def test_env_substitution_fills_values_and_secrets_stay_out_of_errors_and_repr(monkeypatch):
    monkeypatch.setenv("DR_TEST_PASSWORD", "hunter2-secret")
    monkeypatch.setenv("DR_TEST_HOST", "10.0.0.1:9092")
    config = parse_flow(with_(source={"bootstrap_servers": "${env:DR_TEST_HOST}",
                                      "kafka": {"sasl.password": "${env:DR_TEST_PASSWORD}"}}), "f.yaml")
    assert config.source.bootstrap_servers == "10.0.0.1:9092"
    assert config.source.kafka["sasl.password"] == "hunter2-secret"
    assert config.source.redacted_kafka() == {"sasl.password": "***"}
    with pytest.raises(ConfigError) as error:
        parse_flow(with_(source={"kafka": {"sasl.password": "${env:DR_TEST_PASSWORD}", "x": {"a": 1}}}), "f.yaml")
    assert "hunter2" not in str(error.value)
    with_secrets = parse_flow(with_(source={"kafka": {"sasl.jaas.config": "${env:DR_TEST_PASSWORD}"},
                                            "librdkafka": {"sasl.password": "${env:DR_TEST_PASSWORD}"}}), "f.yaml")
    assert "hunter2" not in repr(with_secrets) and "hunter2" not in repr(with_secrets.source)
    assert "librdkafka={'sasl.password': '***'}" in repr(with_secrets.source)


@pytest.mark.parametrize("section", [{"streaming": {"trigger": "${env:DR_TEST_PASSWORD}"}},
                                     {"streaming": {"mode": "${env:DR_TEST_PASSWORD}"}},
                                     {"name": "${env:DR_TEST_PASSWORD}"}])
def test_a_value_from_the_environment_that_is_refused_is_named_as_written_not_shown(monkeypatch, section):
    monkeypatch.setenv("DR_TEST_PASSWORD", "hunter2 secret!")
    with pytest.raises(ConfigError) as error:
        parse_flow(with_(**section), "f.yaml")
    assert "hunter2" not in str(error.value) and "'${env:DR_TEST_PASSWORD}' (its value not shown)" in str(error.value)


def test_a_jaas_string_from_the_environment_becomes_librdkafka_credentials_and_never_shows(monkeypatch):
    from dr_stream.kafka.clients import client_properties

    monkeypatch.setenv("DR_TEST_PASSWORD", "hunter2-secret")
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="drs" '
            'password="${env:DR_TEST_PASSWORD}";')
    config = parse_flow(with_(destination={"kafka": {"security.protocol": "SASL_PLAINTEXT",
                                                     "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas},
                                           "librdkafka": {"client.id": "drs-python"}}), "f.yaml")
    settings = client_properties(config.destination)
    assert (settings["sasl.mechanisms"], settings["sasl.username"], settings["sasl.password"]) == (
        "SCRAM-SHA-512", "drs", "hunter2-secret")
    assert settings["client.id"] == "drs-python" and "sasl.jaas.config" not in settings
    assert "hunter2" not in repr(config.destination.redacted_kafka())


def test_a_missing_truststore_file_is_one_line_naming_file_cluster_and_key():
    from dr_stream.kafka.clients import client_properties

    config = parse_flow(with_(destination={"kafka": {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                                     "ssl.truststore.location": "/nowhere/ca.pem"}}), "f.yaml")
    with pytest.raises(ConfigError) as error:
        client_properties(config.destination)
    assert str(error.value) == ("f.yaml: destination.kafka.ssl.truststore.location: /nowhere/ca.pem: no such file "
                                "(cluster dc2)")


def test_shipped_configs_load():
    for name in ("dc1-to-dc2", "dc2-to-dc1", "dc1-to-dc2-renamed", "dc1-to-dc2-k8s"):
        config = load_flow(f"conf/{name}.yaml")
        assert config.name == name


def test_the_kubernetes_flow_is_the_local_one_with_its_state_where_a_pod_and_this_machine_reach_it():
    from dr_stream.runtime.state_paths import require_shared

    local, k8s = load_flow("conf/dc1-to-dc2.yaml"), load_flow("conf/dc1-to-dc2-k8s.yaml")
    require_shared(k8s)
    for flow in (local, k8s):
        assert flow.source.alias == "dc1" and flow.destination.alias == "dc2"
    assert k8s.source.bootstrap_servers == local.source.bootstrap_servers
    assert k8s.destination.bootstrap_servers == local.destination.bootstrap_servers
    assert k8s.topics.include == local.topics.include
    assert k8s.metrics.port == 9404  # deploy/kubernetes/flow-statefulset.yaml's liveness probe


def test_shipped_configs_replicate_schemas_one_way_from_the_primary():
    from dr_stream.core.policy import TopicFilter, TopicRenamer

    def copies_schemas(name: str) -> bool:
        config = load_flow(f"conf/{name}.yaml")
        return TopicFilter(config.topics.include, config.topics.exclude).matches("_schemas")

    assert copies_schemas("dc1-to-dc2") and copies_schemas("dc1-to-dc2-renamed")
    assert not copies_schemas("dc2-to-dc1")
    assert TopicRenamer("dc1.${topic}").format_remote_topic("_schemas") == "dc1._schemas"


def test_cli_prints_one_line_and_exits_with_the_config_code_on_a_bad_file(tmp_path):
    from dr_stream.exit_codes import ExitCode

    bad = tmp_path / "bad.yaml"
    bad.write_text("source: {alias: dc1, bootstrap_servers: 'x:1'}\n"
                   "destination: {alias: dc2, bootstrap_servers: 'y:1'}\ntopics: {exclude: '*'}\n")
    result = subprocess.run([sys.executable, "-m", "dr_stream.cli", "check-config", "--config", str(bad)],
                            capture_output=True, text=True)
    assert result.returncode == ExitCode.CONFIG == 78
    assert result.stderr.strip().splitlines() == [
        f"dr-stream: config error: {bad}: topics.exclude: expected a list of regex strings"
    ]


def test_unreadable_and_invalid_yaml_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.yaml: cannot read"):
        load_flow(tmp_path / "nope.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("source: [\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml: line \d+: not valid YAML"):
        load_flow(broken)


@pytest.mark.parametrize(("trigger", "seconds"), [("200ms", 0.2), ("1s", 1.0), ("500 milliseconds", 0.5),
                                                  ("2 seconds", 2.0), ("1m", 60.0), ("0s", 0.0)])
def test_every_duration_reads_as_seconds_whatever_its_unit(trigger, seconds):
    raw = {"source": {"alias": "a", "bootstrap_servers": "x:1"},
           "destination": {"alias": "b", "bootstrap_servers": "y:1"},
           "streaming": {"checkpoint_dir": "c", "offset_index": "i", "trigger": trigger}}
    assert parse_flow(raw, "f.yaml").streaming.trigger_s == seconds


@pytest.mark.parametrize(("index", "translations"), [
    (".cache/flows/f/offset-index", ".cache/flows/f/translations"),
    ("s3a://bucket/flows/f/offset-index", "s3a://bucket/flows/f/translations"),
    ("hdfs://nn:8020/flows/f/offset-index/", "hdfs://nn:8020/flows/f/translations"),
    ("offset-index", "translations"),
])
def test_translations_default_beside_the_offset_index_for_paths_and_uris(index, translations):
    raw = {"source": {"alias": "a", "bootstrap_servers": "x:1"},
           "destination": {"alias": "b", "bootstrap_servers": "y:1"}, "streaming": {"offset_index": index}}
    assert parse_flow(raw).streaming.translations == translations


def test_filters_and_query_names_are_built_once_per_config():
    config = parse_flow({"source": {"alias": "a", "bootstrap_servers": "x:1"},
                         "destination": {"alias": "b", "bootstrap_servers": "y:1"},
                         "topics": {"include": ["orders"], "rename": "a.${topic}"},
                         "offsets": {"groups": {"include": ["app-.*"]}}})
    assert config.topic_filter is config.topic_filter
    assert config.remote_topic_filter.matches("a.orders") and not config.remote_topic_filter.matches("orders")
    assert config.group_filter.matches("app-1") and not config.group_filter.matches("other")
    assert (config.replicate_query, config.replicate_checkpoint) == (
        "replicate-a-to-b", ".cache/flows/a-to-b/checkpoints/replicate")



def test_the_trigger_widens_up_to_30s_unless_set_and_never_below_a_longer_trigger():
    base = {"source": {"alias": "a", "bootstrap_servers": "a:9092"},
            "destination": {"alias": "b", "bootstrap_servers": "b:9092"}}
    assert parse_flow({**base, "streaming": {"trigger": "1m"}}).streaming.max_trigger_s == 60.0
    assert parse_flow({**base, "streaming": {"max_trigger": "1s"}}).streaming.max_trigger_s == 1.0  # never widens


def test_realtime_mode_defaults_its_batch_to_5_minutes_and_refuses_one_below_spark_s_minimum():
    base = {"source": {"alias": "a", "bootstrap_servers": "a:9092"},
            "destination": {"alias": "b", "bootstrap_servers": "b:9092"}}
    realtime = parse_flow({**base, "streaming": {"mode": "realtime"}}, "f.yaml").streaming
    assert (realtime.realtime, realtime.trigger_s) == (True, 300.0)
    assert parse_flow(base, "f.yaml").streaming.mode == "microbatch"
    with pytest.raises(ConfigError, match=r"^f.yaml: streaming.trigger: '1s': in realtime mode .* at least 5s"):
        parse_flow({**base, "streaming": {"mode": "realtime", "trigger": "1s"}}, "f.yaml")
    with pytest.raises(ConfigError, match=r"^f.yaml: streaming.mode: expected microbatch or realtime, got 'rt'"):
        parse_flow({**base, "streaming": {"mode": "rt"}}, "f.yaml")


def test_every_key_is_declared_once_with_a_doc_and_a_section_read_empty_is_its_dataclass_defaults():
    from dr_stream.core.config import ACLS, DRILL, GROUPS, METRICS, OFFSETS, PROVENANCE, SECTIONS, SHARE_GROUPS, TOPICS
    from dr_stream.core.config_def import YamlReader

    for _, section in SECTIONS:
        names = [key.name for key in section.keys]
        assert len(names) == len(set(names)) and all(key.doc.strip() for key in section.keys), section.path
    for section in (TOPICS, PROVENANCE, OFFSETS, GROUPS, SHARE_GROUPS, METRICS, DRILL, ACLS):
        assert section.read(YamlReader("f.yaml"), None, section.path) == section.build(), section.path


def test_a_duration_below_its_floor_names_the_floor_and_why():
    with pytest.raises(ConfigError, match=r"^f.yaml: acls.interval: 0.5s is shorter than 1s$"):
        parse_flow(with_(acls={"interval": "500ms"}), "f.yaml")


@pytest.mark.parametrize(("sections", "promised", "why_not"), [
    ({}, (True, True, True), None),
    ({"topics": {"preserve_partitions": False}}, (True, False, False),
     "offset translation needs topics.preserve_partitions: true"),
    ({"provenance": {"enabled": False}}, (False, False, False), "provenance is off: there is no offset index"),
    ({"offsets": {"translate": False}}, (True, True, False), "offsets.translate is false"),
])
def test_what_a_flow_can_promise_is_decided_once_from_its_config(sections, promised, why_not):
    able = parse_flow(with_(**sections), "f.yaml").capabilities
    assert (able.indexed, able.exactly_once, able.translating) == promised
    assert able.not_translated_because == why_not
    assert any("at-least-once" in w for w in able.warnings()) == (not able.exactly_once)
