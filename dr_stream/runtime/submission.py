"""How one flow is handed to spark-submit: `./spark-submit.sh FLOW.yaml [spark-submit options]`.

`plan` is the rule, a pure function from the user's options, the flow and the built artifacts to
spark-submit's argument list; `main` is the shell around it (validate, build, write the private
properties file, run). What the rule guarantees, per where the driver runs:

* local or client mode: the driver is this checkout's venv; the flow file is read where it is.
* YARN, either mode: the packed environment (`make dist`) goes with `--archives` as `./pyenv`,
  and every Python process Spark starts on the cluster uses it; in cluster mode the driver
  itself does, and reads the flow file that `--files` put in its working directory.
* Kubernetes cluster mode: the image has the package, its environment and the jars
  (deploy/kubernetes/Dockerfile); the job file is the image's own.
* inside the image (`pod_driver`: the pod is the driver, in client mode): the image's Spark,
  job file and jars; nothing is shipped, since the executors run the same image.
* Kubernetes, either mode, and cluster mode anywhere: the flow's state is on shared storage
  (a pod's own disk goes with the pod).
* YARN cluster mode: each `${env:NAME}` the flow file uses is set on the remote driver from
  this shell (`spark.yarn.appMasterEnv.NAME`), through a properties file only this user can
  read, never on a command line that `ps` shows; Spark redacts those keys in its UI and logs.
* Kubernetes cluster mode: no value leaves this shell. Each `${env:NAME}` is a reference to the
  key NAME of a Kubernetes Secret (`spark.kubernetes.driver.secretKeyRef.NAME`), the flow's
  `dr-stream-<flow>` unless `DR_STREAM_KUBERNETES_SECRET` names another, so the driver pod's
  spec holds the Secret's name and never a password (anyone allowed `get pods` reads a spec;
  only those allowed `get secrets` read a Secret). A `--conf` of the user's for a NAME wins.
* YARN and Kubernetes, either mode: Spark's RPC between the driver and its executors is
  authenticated and encrypted (`spark.authenticate`, `spark.network.crypto.enabled`). YARN hands
  each application its secret; on Kubernetes Spark would put a generated one in every executor
  pod's spec, so the secret is the key `secret` of the Secret `<flow's Secret>-rpc`, mounted
  on the driver and the executors (`rpc_security`). A user's `spark.authenticate` or
  `spark.authenticate.secret...` makes it theirs.
* the user's own `--files`, `--jars`, `--archives` are merged with dr-stream's, since
  spark-submit keeps only the last of each.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from dr_stream.core.config import ConfigError, env_names
from dr_stream.exit_codes import ExitCode

_LISTS = ("--files", "--jars", "--archives", "--py-files")
IMAGE_JOB_PATH = "/opt/dr-stream/jobs/replicate.py"  # the image's job file (deploy/kubernetes/Dockerfile)
IMAGE_JOB = f"local://{IMAGE_JOB_PATH}"
IMAGE_PYTHON = "/opt/dr-stream/venv/bin/python"  # the image's venv (deploy/kubernetes/Dockerfile)


@dataclass(frozen=True)
class Target:
    """Where the application goes, as spark-submit will read it from the options."""

    master: str = "local[2]"
    deploy_mode: str = "client"

    @property
    def on_yarn(self) -> bool:
        return self.master == "yarn"

    @property
    def on_kubernetes(self) -> bool:
        return self.master.startswith("k8s://")

    @property
    def cluster_mode(self) -> bool:
        return self.deploy_mode == "cluster"

    @classmethod
    def of(cls, options: list[str]) -> Target:
        found = {"master": cls.master, "deploy_mode": cls.deploy_mode}
        conf_keys = {"spark.master": "master", "spark.submit.deployMode": "deploy_mode"}
        for name, value in _pairs(options, {"--master", "--deploy-mode", "--conf"}):
            if name in ("--master", "--deploy-mode"):
                found[name[2:].replace("-", "_")] = value
            elif name == "--conf" and "=" in value and value.split("=", 1)[0] in conf_keys:
                found[conf_keys[value.split("=", 1)[0]]] = value.split("=", 1)[1]
        return cls(**found)


def _pairs(options: list[str], names: set[str]) -> Iterator[tuple[str, str]]:
    """(option, value) for each `--opt value` and `--opt=value` among spark-submit options whose
    option is in `names` (options outside it may take no value, like `--verbose`)."""
    i = 0
    while i < len(options):
        name, equals, inline = options[i].partition("=")
        if name in names and equals:
            yield name, inline
        elif name in names and i + 1 < len(options):
            yield name, options[i + 1]
            i += 1
        i += 1


def driver_environment(target: Target, names: list[str], environ: dict[str, str]) -> dict[str, str]:
    """The properties that set a YARN cluster-mode driver's environment from this shell's values;
    none when the driver runs here, and none on Kubernetes (`secret_references`)."""
    if not (target.cluster_mode and target.on_yarn):
        return {}
    return {"spark.yarn.appMasterEnv." + name: environ[name] for name in names if name in environ}


SECRET_REF = "spark.kubernetes.driver.secretKeyRef."


# Kubernetes names a Secret by a DNS subdomain: lowercase labels of letters, digits and '-' that
# start and end with a letter or digit, joined by '.', 253 characters at most.
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def kubernetes_secret(flow_name: str, environ: dict[str, str]) -> str:
    """The Secret whose keys a Kubernetes cluster-mode driver reads its `${env:...}` from.
    Raises ConfigError for a name Kubernetes refuses: the driver pod would wait forever on it
    (CreateContainerConfigError) instead of failing at submit."""
    given = environ.get("DR_STREAM_KUBERNETES_SECRET")
    secret = given or f"dr-stream-{flow_name}"
    if len(secret) <= 253 and _SUBDOMAIN.fullmatch(secret):
        return secret
    rule = "lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, 253 at most"
    if given:
        raise ConfigError(f"DR_STREAM_KUBERNETES_SECRET={given!r} is not a Kubernetes Secret name ({rule})")
    raise ConfigError(f"the flow's name {flow_name!r} gives the Secret name {secret!r}, which Kubernetes refuses "
                      f"({rule}): set DR_STREAM_KUBERNETES_SECRET to the Secret that holds the flow's variables")


def secret_references(target: Target, names: list[str], secret: str, options: list[str]) -> dict[str, str]:
    """For a Kubernetes cluster-mode driver, each variable as the key of the same name in
    `secret`, except those the user's own options already reference; none anywhere else."""
    if not (target.cluster_mode and target.on_kubernetes):
        return {}
    given = {value.split("=", 1)[0][len(SECRET_REF):] for _, value in _pairs(options, {"--conf"})
             if value.startswith(SECRET_REF) and "=" in value}
    return {SECRET_REF + name: f"{secret}:{name}" for name in names if name not in given}


# Where the driver and executor pods find Spark's RPC secret: the Secret `<flow's Secret>-rpc`,
# whose key `secret` becomes the file `secret` there.
RPC_SECRET_DIR = "/etc/dr-stream/rpc"
RPC_SECRET_FILE = f"{RPC_SECRET_DIR}/secret"
# An executor start-up JVM option of dr-stream's, numbered past Spark's own (0, 1, ...).
EXECUTOR_MASTER_OPTION = "SPARK_JAVA_OPT_1000"


def rpc_secret(secret: str) -> str:
    """The Kubernetes Secret that holds the flow's RPC secret, beside its variables' `secret`."""
    return f"{secret}-rpc"


def _owns_authentication(key: str) -> bool:
    """Whether a user's setting decides Spark's RPC authentication: on or off, or where its secret
    comes from. A tuning key (`spark.authenticate.secretBitLength`, ...) leaves ours on."""
    return key in ("spark.authenticate", "spark.authenticate.secret") or key.startswith("spark.authenticate.secret.")


def rpc_security(target: Target, options: list[str], secret: str, environ: Mapping[str, str]) -> dict[str, str]:
    """Spark's settings that authenticate and encrypt the RPC between the driver and its executors.
    On Kubernetes the secret is a file from a mounted Secret, since a generated one would be an
    environment variable in every executor pod's spec; a client-mode driver outside a pod reads
    it where `DR_STREAM_RPC_SECRET_FILE` says. A user's `spark.authenticate` or secret option: none."""
    if not (target.on_yarn or target.on_kubernetes):
        return {}
    if any(_owns_authentication(value.split("=", 1)[0]) for _, value in _pairs(options, {"--conf"})):
        return {}
    conf = {"spark.authenticate": "true", "spark.network.crypto.enabled": "true"}
    if target.on_yarn:
        return conf  # YARN hands each application its own secret, through its credentials
    mounted = rpc_secret(secret)
    # An executor asks the driver for its settings before it has them, with only its start-up
    # options: it reads the secret from `spark.authenticate.secret.file`, and only where its
    # `spark.master` names Kubernetes, which is no start-up option. Spark's image convention
    # hands an executor's JVM every SPARK_JAVA_OPT_<n> variable: one more carries the master.
    conf["spark.authenticate.secret.file"] = RPC_SECRET_FILE
    conf["spark.authenticate.secret.executor.file"] = RPC_SECRET_FILE
    conf[f"spark.executorEnv.{EXECUTOR_MASTER_OPTION}"] = f"-Dspark.master={target.master}"
    conf[f"spark.kubernetes.executor.secrets.{mounted}"] = RPC_SECRET_DIR
    if target.cluster_mode:
        conf["spark.authenticate.secret.driver.file"] = RPC_SECRET_FILE
        conf[f"spark.kubernetes.driver.secrets.{mounted}"] = RPC_SECRET_DIR
    else:
        conf["spark.authenticate.secret.driver.file"] = environ.get("DR_STREAM_RPC_SECRET_FILE") or RPC_SECRET_FILE
    return conf


@dataclass(frozen=True)
class Artifacts:
    """What a submission ships: the Spark jars, the packed environment, the job file."""

    jars: tuple[str, ...]
    pyenv: str
    job: str


def _merged(options: list[str], ours: dict[str, list[str]]) -> list[str]:
    """The user's options with each comma-list option given once, dr-stream's entries first."""
    rest: list[str] = []
    lists = {name: list(values) for name, values in ours.items()}
    i = 0
    while i < len(options):
        item = options[i]
        name, _, inline = item.partition("=")
        if name in _LISTS:
            value = inline if inline else (options[i + 1] if i + 1 < len(options) else "")
            lists.setdefault(name, []).extend(v for v in value.split(",") if v)
            i += 1 if inline else 2
            continue
        rest.append(item)
        i += 1
    merged = [x for name, values in lists.items() if values for x in (name, ",".join(values))]
    return merged + rest


def plan(options: list[str], flow_path: str, flow_name: str, artifacts: Artifacts, redaction: str,
         properties_file: str | None, secret: str, environ: Mapping[str, str]) -> list[str]:
    """spark-submit's arguments (without the program itself) for one flow; `secret`: the flow's
    Kubernetes Secret (`kubernetes_secret`), on Kubernetes; `environ`: the submitting shell's
    environment (what it says of the log format and of Spark's RPC secret file)."""
    from dr_stream.runtime.session import CONSUMER_CACHE

    target = Target.of(options)
    conf = {
        "spark.ui.showConsoleProgress": "false",
        "spark.redaction.regex": redaction,
        "spark.driver.memory": "2g",
        **CONSUMER_CACHE,
    }
    ours: dict[str, list[str]] = {}
    flow_argument = str(Path(flow_path).resolve())
    job = artifacts.job
    if target.on_yarn:
        ours["--archives"] = [f"{artifacts.pyenv}#pyenv"]
        conf["spark.yarn.appMasterEnv.PYSPARK_PYTHON"] = "./pyenv/bin/python"
        conf["spark.yarn.appMasterEnv.PYSPARK_DRIVER_PYTHON"] = "./pyenv/bin/python"
        conf["spark.executorEnv.PYSPARK_PYTHON"] = "./pyenv/bin/python"
        # A driver that dies is restarted once by YARN; failures older than an hour are
        # forgotten, so a flow running for months is not given up after its second lost node.
        conf["spark.yarn.maxAppAttempts"] = "2"
        conf["spark.yarn.am.attemptFailuresValidityInterval"] = "1h"
    # The driver and its executors talk over the cluster's network, and every task carries the
    # flow's Kafka properties, passwords included: Spark's RPC authenticates both ends and
    # encrypts the channel.
    conf.update(rpc_security(target, options, secret, environ))
    if target.on_kubernetes and target.cluster_mode:
        job = IMAGE_JOB  # the image carries the jars and the package
    else:
        ours["--jars"] = list(artifacts.jars)
    if target.cluster_mode:
        ours["--files"] = [flow_argument]
        flow_argument = Path(flow_path).name  # where --files puts it: the driver's working directory
    _log4j2(target, conf, ours, environ)
    _java_options(conf)
    head = ["--master", target.master, "--deploy-mode", target.deploy_mode, "--name", f"dr-stream-{flow_name}"]
    if properties_file:
        head += ["--properties-file", properties_file, "--load-spark-defaults"]
    for key, value in conf.items():
        head += ["--conf", f"{key}={value}"]
    return [*head, *_merged(options, ours), job, "--config", flow_argument]


def _java_options(conf: dict[str, str]) -> None:
    """The flow's JIT and collector choices (`session.DRIVER_JAVA_OPTIONS` says why) for the
    driver and the executors, where the record path runs on a cluster, ahead of what else this
    plan gives them. A `--conf` of the user's for either key still replaces the whole value."""
    from dr_stream.runtime.session import flow_java_options

    options = flow_java_options()
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        conf[key] = f"{options} {conf[key]}" if conf.get(key) else options


def _log4j2(target: Target, conf: dict[str, str], ours: dict[str, list[str]], environ: Mapping[str, str]) -> None:
    """dr-stream's log4j2 configuration for every JVM of the application, read before its first
    line. A driver here reads the package's file; YARN containers get it with `--files` in their
    working directory. A Kubernetes image brings its own (its SPARK_CONF_DIR)."""
    if target.on_kubernetes and target.cluster_mode:
        return
    from dr_stream.runtime.session import log4j2_file

    log_format = environ.get("DR_STREAM_LOG_FORMAT", "text")
    local = log4j2_file(log_format)
    if log_format != "text" and target.cluster_mode:  # the remote driver's Python lines too
        prefix = "spark.yarn.appMasterEnv." if target.on_yarn else "spark.kubernetes.driverEnv."
        conf[prefix + "DR_STREAM_LOG_FORMAT"] = log_format
    shipped = f"-Dlog4j2.configurationFile={local.name}"
    here = f"-Dlog4j2.configurationFile=file:{local}"
    conf["spark.driver.extraJavaOptions"] = shipped if target.cluster_mode else here
    if target.on_yarn:
        ours.setdefault("--files", []).append(str(local))
        conf["spark.executor.extraJavaOptions"] = shipped


def _python_environment(target: Target, root: Path) -> dict[str, str]:
    """The submitting process's environment: which Python runs the driver here and the executors."""
    import pyspark

    env = dict(os.environ)
    # spark-submit would otherwise ask PYSPARK_DRIVER_PYTHON where Spark is, and that may name
    # an interpreter that exists only inside the containers.
    env.setdefault("SPARK_HOME", os.path.dirname(pyspark.__file__))
    local_python = str(root / ".venv" / "bin" / "python")
    if target.on_yarn:
        # Spark hands both variables on to a cluster-mode driver: there, both mean the packed one.
        env["PYSPARK_PYTHON"] = "./pyenv/bin/python"  # inside the containers
        if target.cluster_mode:
            env["PYSPARK_DRIVER_PYTHON"] = "./pyenv/bin/python"
        else:
            env.setdefault("PYSPARK_DRIVER_PYTHON", local_python)
    elif target.on_kubernetes and target.cluster_mode:
        # spark-submit hands both on to the driver pod, where only the image's Python exists
        env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = IMAGE_PYTHON
    else:
        env.setdefault("PYSPARK_PYTHON", local_python)
    return env


def main(argv: list[str], in_image: bool = False) -> int:
    """`in_image`: submitted from inside dr-stream's image, not from a checkout."""
    from dr_stream.core.config import load_flow
    from dr_stream.runtime.dist import dist_dir
    from dr_stream.runtime.jvm import spark_jars
    from dr_stream.runtime.paths import project_root
    from dr_stream.runtime.session import REDACTED_CONF
    from dr_stream.runtime.state_paths import require_shared

    flow_path, options = argv[0], argv[1:]
    target = Target.of(options)
    names = env_names(Path(flow_path).read_text())
    unset = [n for n in names if n not in os.environ] if target.cluster_mode else []
    if unset and not target.on_kubernetes:
        # The remote driver may get them from its cluster (a YARN appMasterEnv set elsewhere).
        print(f"spark-submit.sh: {', '.join(unset)} not set here: the driver must get them from its cluster",
              file=sys.stderr)
    # The flow is checked here with stand-ins, which pass as a host:port or any text.
    os.environ.update({n: "unset.at.submit:9092" for n in unset})
    try:
        flow = load_flow(flow_path)
        if target.cluster_mode or target.on_kubernetes:
            require_shared(flow)
    except ConfigError as exc:
        print(f"spark-submit.sh: config error: {exc}", file=sys.stderr)
        return ExitCode.CONFIG
    secret = ""  # the Secret the variables and the RPC secret come from, on Kubernetes
    if target.on_kubernetes:
        try:
            secret = kubernetes_secret(flow.name, dict(os.environ))
        except ConfigError as exc:
            print(f"spark-submit.sh: config error: {flow_path}: {exc}", file=sys.stderr)
            return ExitCode.CONFIG
        driver_file = rpc_security(target, options, secret, os.environ).get("spark.authenticate.secret.driver.file")
        if driver_file and not target.cluster_mode and not os.path.isfile(driver_file):
            print(f"spark-submit.sh: config error: {flow_path}: Spark's RPC secret {driver_file} does not exist: "
                  f"the driver and its executor pods share it, from the key `secret` of the Kubernetes Secret "
                  f"{rpc_secret(secret)} (mounted at {RPC_SECRET_DIR}; outside a pod, set DR_STREAM_RPC_SECRET_FILE "
                  "to a copy of it)", file=sys.stderr)
            return ExitCode.CONFIG
    root = project_root()
    if in_image:
        artifacts = Artifacts((), "", IMAGE_JOB_PATH)
        submit = os.path.join(os.environ.get("SPARK_HOME", "/opt/spark"), "bin", "spark-submit")
    else:
        if target.on_yarn:
            subprocess.run(["make", "-s", "-C", str(root), "dist"], check=True, stdout=sys.stderr)
        artifacts = Artifacts(tuple(str(j) for j in spark_jars()), str(dist_dir() / "pyenv.tar.gz"),
                              str(root / "jobs" / "replicate.py"))
        submit = str(root / ".venv" / "bin" / "spark-submit")
    for name in unset:
        del os.environ[name]
    properties = driver_environment(target, names, dict(os.environ))
    references = secret_references(target, names, secret, options)
    if properties:
        print(f"spark-submit.sh: passing {', '.join(k.rsplit('.', 1)[1] for k in properties)} "
              "to the driver", file=sys.stderr)
    if references:
        print(f"spark-submit.sh: the driver reads {', '.join(k[len(SECRET_REF):] for k in references)} from the "
              f"Kubernetes Secret {secret} (keys of the same names); no value of this shell is sent", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="dr-stream-submit-") as private:  # mode 0700
        properties_file = None
        if properties or references:
            properties_file = os.path.join(private, "driver-env.properties")
            with open(properties_file, "w", opener=lambda p, f: os.open(p, f, 0o600)) as out:
                out.writelines(f"{k}={_escape(v)}\n" for k, v in {**properties, **references}.items())
        arguments = plan(options, flow_path, flow.name, artifacts, REDACTED_CONF, properties_file, secret,
                         os.environ)
        return _run_forwarding_signals([submit, *arguments], _python_environment(target, root))


def _run_forwarding_signals(command: list[str], env: dict[str, str]) -> int:
    """Runs spark-submit as a child and hands it every SIGTERM, SIGINT and SIGHUP this process
    gets: a scheduler or a test that signals spark-submit.sh must stop Spark, not orphan it.
    (A child, not an exec, so the private properties file can be removed once it exits.)"""
    child = subprocess.Popen(command, env=env)
    forwarded = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    previous = {sig: signal.signal(sig, lambda number, _frame: child.send_signal(number)) for sig in forwarded}
    try:
        return child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _escape(value: str) -> str:
    """A value as a Java properties file reads it back unchanged."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
