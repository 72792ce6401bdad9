"""The JVM side of dr-stream: which Maven artifacts it needs and where they are cached.

Pins live in `pyproject.toml` under `[tool.dr-stream.jvm]`, next to the Python pins, so
one file says every version. They are read when the jars are fetched, never when a flow
runs: an installed package (a packed driver environment, a container image) runs from jars
handed to it by spark-submit and has no `pyproject.toml`. These jar sets are fetched from
Maven Central with Maven:

* `spark`: Spark's Kafka connector and Delta, added to Spark's classpath. Fetched
  *without* transitive dependencies, because pyspark already ships Scala, Jackson,
  Hadoop and the compression codecs and a second copy on the classpath breaks it.
* `kafka`: the Apache Kafka broker (4.x) and MirrorMaker 2 with all their dependencies,
  run as plain `java -cp` processes for the local clusters; `kafka-compat` the same at the
  last 3.x release, for the compatibility test. The Kafka *client* of Spark's connector is a
  pin of its own (`kafka`), which jvm/ is built against.
* `kafka-streams`: Kafka Streams at the brokers' version, without its dependencies (the `kafka`
  set has them, RocksDB aside), for the tests' Streams application.
* `hadoop`: Hadoop's mini-cluster (HDFS and YARN in one JVM) for `dr-stream dev yarn`, at the
  Hadoop version pyspark's own client jars carry, so the cluster speaks the client's protocol.

Invariant: a set whose stamp matches its artifact list is never fetched again, so
`make setup` is idempotent and a second run downloads nothing.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dr_stream.runtime.paths import cache_dir, project_root

_STAMP = ".artifacts"


@dataclass(frozen=True)
class JvmPins:
    scala: str
    spark: str
    spark_token_provider: str
    delta: str
    kafka: str
    kafka_broker: str
    kafka_broker_compat: str
    commons_pool2: str
    hadoop: str
    flink: str
    flink_connector_kafka: str

    @classmethod
    def load(cls, pyproject: Path | None = None) -> JvmPins:
        import tomllib  # only where the pins are read: at setup, in a checkout

        path = pyproject or project_root() / "pyproject.toml"
        try:
            table = tomllib.loads(path.read_text())["tool"]["dr-stream"]["jvm"]
        except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
            raise RuntimeError(f"{path}: cannot read [tool.dr-stream.jvm] ({exc})") from exc
        return cls(
            scala=table["scala"],
            spark=table["spark"],
            spark_token_provider=table["spark-token-provider"],
            delta=table["delta"],
            kafka=table["kafka"],
            kafka_broker=table["kafka-broker"],
            kafka_broker_compat=table["kafka-broker-compat"],
            commons_pool2=table["commons-pool2"],
            hadoop=table["hadoop"],
            flink=table["flink"],
            flink_connector_kafka=table["flink-connector-kafka"],
        )

    def flink_artifacts(self) -> list[str]:
        """A Flink job's classpath, for the tests' Flink job that resumes from translated offsets
        (its local mini-cluster, Flink's Kafka source, and their own Kafka client)."""
        return [f"org.apache.flink:{name}:{self.flink}" for name in
                ("flink-streaming-java", "flink-clients", "flink-connector-base")] + [
            f"org.apache.flink:flink-connector-kafka:{self.flink_connector_kafka}"]

    def spark_artifacts(self) -> list[str]:
        spark_minor = ".".join(self.spark.split(".")[:2])
        return [
            f"org.apache.spark:spark-sql-kafka-0-10_{self.scala}:{self.spark}",
            f"org.apache.spark:spark-token-provider-kafka-0-10_{self.scala}:{self.spark_token_provider}",
            f"org.apache.kafka:kafka-clients:{self.kafka}",
            f"org.apache.commons:commons-pool2:{self.commons_pool2}",
            f"io.delta:delta-spark_{spark_minor}_{self.scala}:{self.delta}",
            f"io.delta:delta-storage:{self.delta}",
        ]

    def kafka_artifacts(self, version: str) -> list[str]:
        """A broker and MirrorMaker 2 at `version`, with the logging its own distribution ships:
        log4j 2 from Kafka 4, slf4j 1.7 + reload4j before."""
        logging = (["org.slf4j:slf4j-reload4j:1.7.36"] if uses_log4j1(version) else
                   ["org.apache.logging.log4j:log4j-slf4j-impl:2.24.3", "org.apache.logging.log4j:log4j-core:2.24.3"])
        return [f"org.apache.kafka:kafka_{self.scala}:{version}", f"org.apache.kafka:connect-mirror:{version}",
                *logging]

    def hadoop_artifacts(self) -> list[str]:
        return [
            f"org.apache.hadoop:hadoop-client-minicluster:{self.hadoop}",
            # The mini-cluster's own test helpers call JUnit's assertions and Bouncy Castle, which
            # its POM leaves to the test classpath it was written for (versions: Hadoop's own).
            "org.junit.jupiter:junit-jupiter-api:5.13.3",
            "org.bouncycastle:bcprov-jdk18on:1.82",
            "org.bouncycastle:bcpkix-jdk18on:1.82",
            "org.slf4j:slf4j-reload4j:1.7.36",
        ]


def uses_log4j1(kafka_version: str) -> bool:
    return int(kafka_version.split(".")[0]) < 4


def jar_dir(name: str) -> Path:
    return cache_dir() / "jars" / name


def _pom(artifacts: list[str], transitive: bool) -> str:
    deps = []
    for coord in artifacts:
        group, artifact, version = coord.split(":")
        # A wildcard exclusion also keeps Maven from walking parent POMs, some of which
        # (Spark's) declare extra repositories that are not reachable from here.
        exclusions = (
            ""
            if transitive
            else "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>"
        )
        deps.append(
            f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version>{exclusions}</dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>dr-stream</groupId><artifactId>jvm-deps</artifactId><version>0</version>"
        "<packaging>pom</packaging><dependencies>" + "".join(deps) + "</dependencies></project>\n"
    )


def fetch(name: str, artifacts: list[str], transitive: bool) -> bool:
    """Copy the artifacts into `.cache/jars/<name>`; returns False when already there."""
    dest = jar_dir(name)
    pom = _pom(artifacts, transitive)
    digest = hashlib.sha256(pom.encode()).hexdigest()
    stamp = dest / _STAMP
    if stamp.exists() and stamp.read_text().strip() == digest and any(dest.glob("*.jar")):
        return False
    if shutil.which("mvn") is None:
        raise RuntimeError("mvn not found on PATH: Maven is needed to fetch the JVM dependencies")
    work = cache_dir() / "maven" / name
    work.mkdir(parents=True, exist_ok=True)
    (work / "pom.xml").write_text(pom)
    staging = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    print(f"fetching {len(artifacts)} {name} artifacts from Maven Central ...", file=sys.stderr, flush=True)
    subprocess.run(
        [
            "mvn", "-q", "-B", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}", "-DincludeScope=runtime",
        ],
        check=True,
    )
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    stamp.write_text(digest + "\n")
    print(f"{name}: {len(list(dest.glob('*.jar')))} jars in {dest}", file=sys.stderr)
    return True


def pyspark_jar(prefix: str) -> Path:
    """One of pyspark's own jars, by the start of its name (`spark-sql-api_`)."""
    import pyspark

    found = sorted((Path(pyspark.__file__).parent / "jars").glob(f"{prefix}*.jar"))
    if not found:
        raise RuntimeError(f"pyspark ships no {prefix}*.jar: is pyspark installed (make setup)?")
    return found[0]


def build_own_jar(pins: JvmPins) -> bool:
    """Build jvm/ (the sink, record path functions) into `.cache/jars/dr-stream`; False when up to date."""
    spark_jars_used = _spark_jars_used()
    # The tests run in `make test` (`run_own_tests`), not at every build.
    return _built(project_root() / "jvm", "dr-stream",
                  f"{pins.kafka} {pins.hadoop} {sorted(p.name for p in spark_jars_used.values())}",
                  "jvm/ (the sink, record path functions, connection check, dev Hadoop)",
                  [*_maven(pins, spark_jars_used), "package", "-DskipTests"])


def build_kafka4_helper(pins: JvmPins) -> bool:
    """Build jvm/kafka4/ (the share- and Streams-group helper, against Kafka 4's client) into
    `.cache/jars/dr-stream-kafka4`, apart from the jars Spark loads; False when up to date."""
    source = project_root() / "jvm" / "kafka4"
    return _built(source, "dr-stream-kafka4", pins.kafka_broker, "jvm/kafka4/ (the share- and Streams-group helper)",
                  ["mvn", "-q", "-B", "-f", str(source / "pom.xml"), f"-Dkafka.version={pins.kafka_broker}",
                   "package"], also=[project_root() / "jvm" / "src" / "main" / "java" / "io" / "drstream" / "kafka" /
                                     "GroupOffsets.java"])


def _built(source: Path, name: str, pinned: str, what: str, command: list[str], also: Sequence[Path] = ()) -> bool:
    """Builds the Maven project at `source` into the jar set `name` unless its sources (and the
    files `also` it compiles from elsewhere) and pins are those of the last build (a stamp of
    their digest); False when up to date."""
    digest = hashlib.sha256(pinned.encode())
    for path in [*sorted([source / "pom.xml", *(source / "src").rglob("*.java")]), *also]:
        digest.update(path.read_bytes())
    dest = jar_dir(name)
    stamp = dest / _STAMP
    if stamp.exists() and stamp.read_text().strip() == digest.hexdigest() and any(dest.glob("*.jar")):
        return False
    print(f"building {what} ...", file=sys.stderr, flush=True)
    subprocess.run(command, check=True)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for jar in (source / "target").glob("*.jar"):
        shutil.copy2(jar, dest / jar.name)
    stamp.write_text(digest.hexdigest() + "\n")
    return True


def _maven(pins: JvmPins, spark_jars_used: dict[str, Path]) -> list[str]:
    source = project_root() / "jvm"
    return ["mvn", "-q", "-B", "-f", str(source / "pom.xml"), f"-Dkafka.version={pins.kafka}",
            f"-Dhadoop.version={pins.hadoop}", *(f"-D{key}={path}" for key, path in spark_jars_used.items())]


def _spark_jars_used() -> dict[str, Path]:
    return {"spark.sql.api.jar": pyspark_jar("spark-sql-api_"), "spark.common.jar": pyspark_jar("spark-common-utils_"),
            "spark.core.jar": pyspark_jar("spark-core_"), "spark.catalyst.jar": pyspark_jar("spark-catalyst_"),
            "spark.unsafe.jar": pyspark_jar("spark-unsafe_"), "kryo.jar": pyspark_jar("kryo-shaded-"),
            "scala.library.jar": pyspark_jar("scala-library-"), "scala.reflect.jar": pyspark_jar("scala-reflect-"),
            "log4j.api.jar": pyspark_jar("log4j-api-"), "log4j.core.jar": pyspark_jar("log4j-core-")}


def run_own_tests(pins: JvmPins) -> None:
    """jvm/'s JUnit tests (the golden contract fixtures among them); raises when one fails."""
    subprocess.run([*_maven(pins, _spark_jars_used()), "test"], check=True)


def check_pyspark_matches(pins: JvmPins) -> None:
    installed = importlib.metadata.version("pyspark")
    if installed != pins.spark:
        raise RuntimeError(
            f"pyproject.toml: [tool.dr-stream.jvm] spark = {pins.spark} but pyspark {installed} is installed; "
            "the Kafka connector must match the Spark it runs in"
        )
    import pyspark

    bundled = sorted(Path(pyspark.__file__).parent.glob("jars/hadoop-client-api-*.jar"))
    version = bundled[0].stem.removeprefix("hadoop-client-api-") if bundled else None
    if version != pins.hadoop:
        raise RuntimeError(
            f"pyproject.toml: [tool.dr-stream.jvm] hadoop = {pins.hadoop} but pyspark carries Hadoop {version}; "
            "the dev cluster must speak the protocol of the client that submits to it"
        )


def setup_jars() -> None:
    pins = JvmPins.load()
    check_pyspark_matches(pins)
    fetched = fetch("spark", pins.spark_artifacts(), transitive=False)
    fetched |= fetch("kafka", pins.kafka_artifacts(pins.kafka_broker), transitive=True)
    fetched |= fetch("kafka-compat", pins.kafka_artifacts(pins.kafka_broker_compat), transitive=True)
    # Kafka Streams for the tests' Streams application: alone, since the brokers' set has its
    # client, and a stateless topology never loads RocksDB (its 60 MB jar is left out).
    fetched |= fetch("kafka-streams", [f"org.apache.kafka:kafka-streams:{pins.kafka_broker}"], transitive=False)
    fetched |= fetch("hadoop", pins.hadoop_artifacts(), transitive=True)
    fetched |= fetch("flink", pins.flink_artifacts(), transitive=True)
    fetched |= build_own_jar(pins)
    fetched |= build_kafka4_helper(pins)
    if not fetched:
        print("JVM dependencies already in place: nothing downloaded", file=sys.stderr)


def _jars(*names: str) -> list[Path]:
    """The jars of these sets, in order; fails with the fix when `make setup` has not run."""
    jars: list[Path] = []
    for name in names:
        found = sorted(jar_dir(name).glob("*.jar"))
        if not found:
            raise RuntimeError(f"no jars in {jar_dir(name)}: run `make setup` first")
        jars += found
    return jars


def spark_jars() -> list[Path]:
    """Jars for Spark's classpath: the connector, Delta, dr-stream's own (not its dev jar)."""
    return [jar for jar in _jars("spark", "dr-stream") if not jar.name.endswith("-dev.jar")]


def local_file_system_jar() -> Path:
    """The jar of dr-stream's local file system (jvm/, classifier local-fs): it needs only
    Hadoop, so it can go on a JVM's own classpath, where the Kafka client is not."""
    found = [jar for jar in _jars("dr-stream") if jar.name.endswith("-local-fs.jar")]
    if not found:
        raise RuntimeError(f"no local-fs jar in {jar_dir('dr-stream')}: run `make setup` first")
    return found[0]


def connection_check_classpath() -> str:
    """dr-stream's jar, the Kafka connector's jars (kafka-clients) and pyspark's own (logging)."""
    import pyspark

    return ":".join([*(str(j) for j in spark_jars()), os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")])


def _classpath(*names: str) -> str:
    return ":".join(str(j) for j in _jars(*names))


def kafka_classpath(compat: bool = False) -> str:
    """The brokers' and MirrorMaker 2's classpath (`compat`: the 3.x brokers')."""
    return _classpath("kafka-compat" if compat else "kafka")


# Kafka 4's client and what it needs to run and log (log4j 2, as Spark's JVMs do): the helper JVM
# of `kafka/group_offsets/kafka4` loads nothing else, so Spark's 3.9 client never meets it.
_KAFKA4_CLIENT_JARS = ("kafka-clients-", "slf4j-api-", "log4j-slf4j-impl-", "log4j-api-", "log4j-core-", "lz4-java-",
                       "snappy-java-", "zstd-jni-")
KAFKA4_CLASSPATH_VARIABLE = "DR_STREAM_KAFKA4_CLASSPATH"


KAFKA4_HELPER_MAIN = "io.drstream.kafka4.Kafka4Groups"


def kafka4_client_classpath() -> str:
    """The share- and Streams-group helper's classpath: its jar (jvm/kafka4/) and Kafka 4's client
    jars, or `DR_STREAM_KAFKA4_CLASSPATH` when set (a host without the jar cache: a YARN or
    Kubernetes driver; it names the helper's jar too)."""
    given = os.environ.get(KAFKA4_CLASSPATH_VARIABLE)
    if given:
        return given
    clients = [j for j in _jars("kafka") if j.name.startswith(_KAFKA4_CLIENT_JARS)]
    return ":".join(str(j) for j in [*_jars("dr-stream-kafka4"), *clients])


def kafka_streams_classpath() -> str:
    """The brokers' set with Kafka Streams, for a Streams application at the brokers' version."""
    return _classpath("kafka", "kafka-streams")


def kafka_logs_through_log4j1(compat: bool = False) -> bool:
    """Whether those jars log through log4j 1 (reload4j), which reads `log4j.configuration`."""
    return any(jar.name.startswith("slf4j-reload4j") for jar in _jars("kafka-compat" if compat else "kafka"))


def hadoop_classpath() -> str:
    """dr-stream's jars (the dev jar holds the cluster's main class) and Hadoop's mini-cluster."""
    return _classpath("dr-stream", "hadoop")


if __name__ == "__main__":
    if sys.argv[1:] == ["--test"]:
        run_own_tests(JvmPins.load())
    else:
        setup_jars()
