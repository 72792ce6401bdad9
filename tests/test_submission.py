"""What spark-submit.sh hands spark-submit, per master and deploy mode (the rule, no Spark started)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dr_stream.core.config import ConfigError, env_names
from dr_stream.runtime.submission import (
    IMAGE_JOB,
    IMAGE_PYTHON,
    Artifacts,
    Target,
    _python_environment,
    driver_environment,
    kubernetes_secret,
    plan,
    secret_references,
)

ARTIFACTS = Artifacts(("/c/jars/kafka.jar", "/c/jars/delta.jar"), "/c/dist/pyenv.tar.gz", "/repo/jobs/replicate.py")


def _plan(*options: str, properties: str | None = None) -> list[str]:
    return plan(list(options), "conf/flow.yaml", "f", ARTIFACTS, "(?i)secret", properties, "dr-stream-f",
                os.environ)


def _conf(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--conf")


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_the_target_is_read_from_options_in_either_spelling_and_from_conf():
    assert Target.of([]) == Target("local[2]", "client")
    assert Target.of(["--master", "yarn", "--deploy-mode=cluster"]) == Target("yarn", "cluster")
    assert Target.of(["--master=k8s://https://api:6443", "--conf", "spark.submit.deployMode=cluster"]).cluster_mode
    # A flag without a value does not swallow the option after it.
    assert Target.of(["--verbose", "--master", "yarn", "--supervise", "--deploy-mode", "cluster"]) == \
        Target("yarn", "cluster")


def test_local_mode_ships_the_jars_and_reads_the_flow_file_where_it_is():
    argv = _plan()
    assert argv[:4] == ["--master", "local[2]", "--deploy-mode", "client"]
    assert _option(argv, "--jars") == "/c/jars/kafka.jar,/c/jars/delta.jar"
    assert "--archives" not in argv and "--files" not in argv
    assert argv[-3:-1] == ["/repo/jobs/replicate.py", "--config"] and argv[-1].endswith("/conf/flow.yaml")


def test_yarn_cluster_mode_ships_the_packed_environment_and_the_flow_file_by_its_base_name():
    argv = _plan("--master", "yarn", "--deploy-mode", "cluster")
    conf = _conf(argv)
    assert _option(argv, "--archives") == "/c/dist/pyenv.tar.gz#pyenv"
    assert conf["spark.yarn.appMasterEnv.PYSPARK_PYTHON"] == "./pyenv/bin/python"
    assert conf["spark.yarn.maxAppAttempts"] == "2"
    assert _option(argv, "--files").split(",")[0].endswith("/conf/flow.yaml")
    assert argv[-2:] == ["--config", "flow.yaml"]


def test_yarn_client_mode_gives_the_executors_the_packed_environment_but_reads_the_flow_file_here():
    argv = _plan("--master", "yarn", "--deploy-mode", "client")
    assert _option(argv, "--archives") == "/c/dist/pyenv.tar.gz#pyenv"
    assert _option(argv, "--files").endswith("/dr_stream/runtime/log4j2.properties")  # for the executors
    assert argv[-1].endswith("/conf/flow.yaml")


def test_kubernetes_cluster_mode_runs_the_images_job_and_ships_no_jars():
    argv = _plan("--master", "k8s://https://api:6443", "--deploy-mode", "cluster")
    assert "--jars" not in argv and "--archives" not in argv
    assert argv[-3] == IMAGE_JOB and argv[-2:] == ["--config", "flow.yaml"]


def test_a_kubernetes_driver_pod_runs_the_images_python_not_this_checkouts(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", "/home/me/.venv/bin/python")
    target = Target.of(["--master", "k8s://https://api:6443", "--deploy-mode", "cluster"])
    env = _python_environment(target, Path("/repo"))
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == IMAGE_PYTHON
    client = _python_environment(Target.of(["--master", "k8s://https://api:6443"]), Path("/repo"))
    assert client["PYSPARK_PYTHON"] == "/home/me/.venv/bin/python"  # a client-mode driver is this machine's


def test_the_users_files_jars_and_archives_are_merged_with_ours_not_replaced():
    argv = _plan("--master", "yarn", "--deploy-mode", "cluster", "--files", "/etc/kafka/truststore.p12",
                 "--jars=/x/extra.jar", "--queue", "streaming")
    assert argv.count("--files") == 1 and argv.count("--jars") == 1
    assert _option(argv, "--files").split(",")[-1] == "/etc/kafka/truststore.p12"
    assert _option(argv, "--jars").split(",")[-1] == "/x/extra.jar"
    assert _option(argv, "--queue") == "streaming"


def test_every_jvm_reads_dr_streams_log4j2_configuration_from_its_first_line():
    local = _conf(_plan())["spark.driver.extraJavaOptions"]
    assert " -Dlog4j2.configurationFile=file:/" in local
    assert local.endswith("/dr_stream/runtime/log4j2.properties")
    yarn = _plan("--master", "yarn", "--deploy-mode", "cluster")
    assert _conf(yarn)["spark.driver.extraJavaOptions"].endswith(" -Dlog4j2.configurationFile=log4j2.properties")
    assert _conf(yarn)["spark.executor.extraJavaOptions"].endswith(" -Dlog4j2.configurationFile=log4j2.properties")
    assert _option(yarn, "--files").split(",")[1].endswith("/dr_stream/runtime/log4j2.properties")


def test_json_logs_switch_every_jvm_and_a_remote_drivers_python_lines(monkeypatch):
    monkeypatch.setenv("DR_STREAM_LOG_FORMAT", "json")
    yarn = _plan("--master", "yarn", "--deploy-mode", "cluster")
    assert _conf(yarn)["spark.executor.extraJavaOptions"].endswith(" -Dlog4j2.configurationFile=log4j2-json.properties")
    assert _conf(yarn)["spark.yarn.appMasterEnv.DR_STREAM_LOG_FORMAT"] == "json"
    assert _conf(_plan())["spark.driver.extraJavaOptions"].endswith("/dr_stream/runtime/log4j2-json.properties")


def test_the_flows_jit_and_collector_choices_reach_the_driver_and_the_executors(monkeypatch):
    from dr_stream.runtime.session import DRIVER_JAVA_OPTIONS

    for argv in (_plan("--master", "yarn", "--deploy-mode", "cluster"), _plan("--master", "yarn"),
                 _plan("--master", "k8s://https://127.0.0.1:6443", "--deploy-mode", "cluster")):
        conf = _conf(argv)
        assert conf["spark.driver.extraJavaOptions"].startswith(DRIVER_JAVA_OPTIONS), argv
        assert conf["spark.executor.extraJavaOptions"].startswith(DRIVER_JAVA_OPTIONS), argv
    monkeypatch.setenv("DR_STREAM_DRIVER_JAVA_OPTIONS", "-XX:+UseG1GC")
    conf = _conf(_plan("--master", "yarn", "--deploy-mode", "cluster"))
    assert conf["spark.executor.extraJavaOptions"] == "-XX:+UseG1GC -Dlog4j2.configurationFile=log4j2.properties"


def test_on_yarn_the_driver_and_executors_authenticate_and_encrypt_their_rpc_unless_the_user_says_otherwise():
    for mode in ("client", "cluster"):
        conf = _conf(_plan("--master", "yarn", "--deploy-mode", mode))
        assert (conf["spark.authenticate"], conf["spark.network.crypto.enabled"]) == ("true", "true")
    argv = _plan("--master", "yarn", "--conf", "spark.network.crypto.enabled=false")
    # spark-submit takes the last of a key given twice: the user's
    given = [a for a in argv if a.startswith("spark.network.crypto.enabled=")]
    assert given[-1] == "spark.network.crypto.enabled=false"
    assert "spark.authenticate" not in _conf(_plan())


def test_on_kubernetes_the_rpc_secret_is_a_mounted_file_so_no_pod_spec_holds_it():
    cluster = _conf(_plan("--master", "k8s://https://api:6443", "--deploy-mode", "cluster"))
    assert (cluster["spark.authenticate"], cluster["spark.network.crypto.enabled"]) == ("true", "true")
    # Spark puts a generated secret in each executor's environment unless both files are set
    assert cluster["spark.authenticate.secret.driver.file"] == "/etc/dr-stream/rpc/secret"
    assert cluster["spark.authenticate.secret.executor.file"] == "/etc/dr-stream/rpc/secret"
    assert cluster["spark.kubernetes.driver.secrets.dr-stream-f-rpc"] == "/etc/dr-stream/rpc"
    assert cluster["spark.kubernetes.executor.secrets.dr-stream-f-rpc"] == "/etc/dr-stream/rpc"
    assert "spark.authenticate.secret" not in cluster
    # what an executor reads before the driver hands it its settings: the file, where its master is Kubernetes
    assert cluster["spark.authenticate.secret.file"] == "/etc/dr-stream/rpc/secret"
    assert cluster["spark.executorEnv.SPARK_JAVA_OPT_1000"] == "-Dspark.master=k8s://https://api:6443"
    client = _conf(_plan("--master", "k8s://https://api:6443", "--deploy-mode", "client"))
    assert client["spark.kubernetes.executor.secrets.dr-stream-f-rpc"] == "/etc/dr-stream/rpc"
    assert not any(key.startswith("spark.kubernetes.driver.secrets.") for key in client)  # the driver is here
    # the user's own spark.authenticate* makes the whole of it theirs: no Secret of ours is mounted
    own = _conf(_plan("--master", "k8s://https://api:6443", "--conf", "spark.authenticate=false"))
    assert own["spark.authenticate"] == "false" and not any(".secrets." in key for key in own)
    own = _conf(_plan("--master", "k8s://https://api:6443", "--conf", "spark.authenticate.secret.file=/mine"))
    assert own["spark.authenticate.secret.file"] == "/mine" and not any(".secrets." in key for key in own)
    # a tuning key of the user's leaves it on
    tuned = _conf(_plan("--master", "yarn", "--conf", "spark.authenticate.secretBitLength=512"))
    assert tuned["spark.authenticate"] == "true"


def test_a_client_mode_driver_without_the_rpc_secret_file_is_one_clear_error(tmp_path, monkeypatch, capsys):
    from dr_stream.exit_codes import ExitCode
    from dr_stream.runtime.submission import main

    flow = tmp_path / "flow.yaml"
    flow.write_text((Path(__file__).parents[1] / "conf" / "dc1-to-dc2-k8s.yaml").read_text())
    monkeypatch.setenv("DR_STREAM_RPC_SECRET_FILE", str(tmp_path / "absent"))
    code = main([str(flow), "--master", "k8s://https://127.0.0.1:6443"], in_image=True)
    assert code == ExitCode.CONFIG
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path / "absent") in err[0] and "dr-stream-dc1-to-dc2-k8s-rpc" in err[0]


def test_a_properties_file_is_passed_with_spark_defaults_still_loaded():
    argv = _plan("--master", "yarn", "--deploy-mode", "cluster", properties="/tmp/p/driver-env.properties")
    assert _option(argv, "--properties-file") == "/tmp/p/driver-env.properties"
    assert "--load-spark-defaults" in argv


def test_the_flow_files_variables_go_to_a_remote_driver_only():
    names = env_names("a: ${env:DC1_USER}\nb: ${env:DC1_PASSWORD}-${env:DC1_USER}\n")
    assert names == ["DC1_USER", "DC1_PASSWORD"]
    environ = {"DC1_USER": "drs", "DC1_PASSWORD": "s3cret"}
    assert driver_environment(Target("yarn", "cluster"), names, environ) == {
        "spark.yarn.appMasterEnv.DC1_USER": "drs", "spark.yarn.appMasterEnv.DC1_PASSWORD": "s3cret"}
    assert driver_environment(Target("k8s://https://api", "cluster"), names, environ) == {}
    assert driver_environment(Target("yarn", "client"), names, environ) == {}


def test_a_kubernetes_driver_reads_each_variable_from_a_secret_and_is_given_no_value():
    names = ["DC1_USER", "DC1_PASSWORD"]
    k8s = Target("k8s://https://api", "cluster")
    secret = kubernetes_secret("dc1-to-dc2", {})
    assert secret == "dr-stream-dc1-to-dc2"
    assert secret_references(k8s, names, secret, []) == {
        "spark.kubernetes.driver.secretKeyRef.DC1_USER": "dr-stream-dc1-to-dc2:DC1_USER",
        "spark.kubernetes.driver.secretKeyRef.DC1_PASSWORD": "dr-stream-dc1-to-dc2:DC1_PASSWORD"}
    assert kubernetes_secret("dc1-to-dc2", {"DR_STREAM_KUBERNETES_SECRET": "kafka-creds"}) == "kafka-creds"
    # the user's own reference for a name is theirs: none of ours beside it
    own = ["--conf", "spark.kubernetes.driver.secretKeyRef.DC1_PASSWORD=vault:dc1"]
    assert secret_references(k8s, names, secret, own) == {
        "spark.kubernetes.driver.secretKeyRef.DC1_USER": "dr-stream-dc1-to-dc2:DC1_USER"}
    for elsewhere in (Target("yarn", "cluster"), Target("k8s://https://api", "client"), Target()):
        assert secret_references(elsewhere, names, secret, []) == {}


def test_spark_redacts_every_variable_handed_to_a_remote_driver():
    import re

    from dr_stream.runtime.session import REDACTED_CONF

    assert re.search(REDACTED_CONF, "spark.yarn.appMasterEnv.DC1_USER")
    assert re.search(REDACTED_CONF, "spark.kubernetes.driverEnv.ANYTHING")


def test_a_secret_name_kubernetes_refuses_is_one_clear_error_at_submit():
    with pytest.raises(ConfigError, match=r"DR_STREAM_KUBERNETES_SECRET='Kafka_Creds' is not a Kubernetes Secret"):
        kubernetes_secret("dc1-to-dc2", {"DR_STREAM_KUBERNETES_SECRET": "Kafka_Creds"})
    with pytest.raises(ConfigError, match=r"flow's name 'DC1_to_DC2'.*set DR_STREAM_KUBERNETES_SECRET"):
        kubernetes_secret("DC1_to_DC2", {})
    assert kubernetes_secret("DC1_to_DC2", {"DR_STREAM_KUBERNETES_SECRET": "kafka.creds-1"}) == "kafka.creds-1"
    for refused in ("-creds", "creds-", "a..b", "x" * 254):
        with pytest.raises(ConfigError):
            kubernetes_secret("f", {"DR_STREAM_KUBERNETES_SECRET": refused})


def test_spark_submit_sh_refuses_a_kubernetes_secret_name_before_it_submits(tmp_path, monkeypatch, capsys):
    from dr_stream.exit_codes import ExitCode
    from dr_stream.runtime.submission import main

    flow = tmp_path / "flow.yaml"
    text = (Path(__file__).parents[1] / "conf" / "dc1-to-dc2-k8s.yaml").read_text()
    flow.write_text(text.replace("127.0.0.1:29092", "${env:DC2_BOOTSTRAP}"))
    monkeypatch.setenv("DC2_BOOTSTRAP", "dc2:9092")
    monkeypatch.setenv("DR_STREAM_KUBERNETES_SECRET", "DC2_creds")
    code = main([str(flow), "--master", "k8s://https://127.0.0.1:6443", "--deploy-mode", "cluster"], in_image=True)
    assert code == ExitCode.CONFIG
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(flow) in err[0] and "DR_STREAM_KUBERNETES_SECRET='DC2_creds'" in err[0]
    assert "dc2:9092" not in err[0]
