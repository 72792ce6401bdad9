"""Which part of a replicator a CPU sample belongs to: the rules of `make profile`'s breakdown.

A sample is a thread's name and its stack, root first. The stack is read from the leaf up and the
first frame a rule knows decides, so a JSON generator called from the sink's projection counts as
the record path's JSON, not as the sink. A thread no sample was taken in (the JVM's collectors
and compilers, librdkafka's threads) is named by its thread name alone.
"""

from __future__ import annotations

import re

# JVM frames, "package.Class.method", most specific first within a stack's reading.
_JVM_FRAMES: list[tuple[str, re.Pattern[str]]] = [
    ("sink: provenance header", re.compile(r"^io\.drstream\.kafka\.ProvenanceWriter\b")),
    ("sink: copy runs", re.compile(r"^io\.drstream\.kafka\.(CopyRuns|RunPublisher|CopyProducer\$Sent)\b")),
    ("group offsets (Java admin, driver loops)", re.compile(r"^io\.drstream\.kafka\.GroupOffsets\b")),
    ("record path: JSON (provenance header)",
     re.compile(r"^(com\.fasterxml\.jackson\.|org\.apache\.spark\.sql\.catalyst\.json\.|"
                r"org\.apache\.spark\.sql\.catalyst\.expressions\.(StructsToJson|JsonToStructs)\b)")),
    ("record path: expressions (generated code)",
     re.compile(r"^org\.apache\.spark\.sql\.catalyst\.expressions\.(GeneratedClass|codegen\.|"
                r"UnsafeProjection|InterpretedUnsafeProjection|Interpreted)")),
    ("row conversion: record -> row", re.compile(r"^org\.apache\.spark\.sql\.kafka010\.KafkaRecordToRowConverter\b")),
    ("sink: row -> producer record", re.compile(r"^(org\.apache\.spark\.sql\.kafka010\.(KafkaWriteTask|KafkaRowWriter|"
                                                 r"KafkaDataWriter|KafkaWrite|KafkaStreamingWrite)|"
                                                 r"io\.drstream\.spark\.Copy|io\.drstream\.kafka\.CopyProducer)\b")),
    ("producer", re.compile(r"^org\.apache\.kafka\.clients\.producer\.")),
    ("Kafka source: consumer", re.compile(r"^(org\.apache\.kafka\.clients\.consumer\.|"
                                           r"org\.apache\.spark\.sql\.kafka010\.consumer\.)")),
    ("Kafka source: Spark reader", re.compile(r"^org\.apache\.spark\.sql\.kafka010\.")),
    ("admin client", re.compile(r"^org\.apache\.kafka\.clients\.admin\.")),
    ("Delta, Parquet, checkpoint files", re.compile(r"^(io\.delta\.|org\.apache\.parquet\.|org\.apache\.hadoop\.|"
                                                     r"org\.apache\.spark\.sql\.execution\.datasources\.)")),
    ("py4j (JVM side)", re.compile(r"^py4j\.")),
    ("Spark: planning, scheduling, progress",
     re.compile(r"^org\.apache\.spark\.sql\.(execution\.streaming|catalyst\.(analysis|optimizer|planning|trees|rules)|"
                r"execution\.(QueryExecution|SparkPlanner|adaptive))|^org\.apache\.spark\.(scheduler|executor|"
                r"rpc|storage|status|ui|util|sql\.connector)\.")),
    ("Kafka client: network", re.compile(r"^org\.apache\.kafka\.(clients|common\.network)\.")),
    ("MirrorMaker 2 / Connect", re.compile(r"^org\.apache\.kafka\.connect\.")),
]

# Thread names decide where a stack alone would not: a producer's sender thread runs the
# network client, which the consumer runs too.
_JVM_THREADS: list[tuple[str, re.Pattern[str]]] = [
    ("producer", re.compile(r"^kafka-producer-network-thread")),
    ("admin client", re.compile(r"^kafka-admin-client-thread|^adminclient")),
]

# Threads that run no Java code (or are not sampled), by their OS name (15 characters at most).
_NATIVE_THREADS: list[tuple[str, re.Pattern[str]]] = [
    ("JVM: garbage collection", re.compile(r"^(GC Thread|G1 |VM Periodic|GC )")),
    ("JVM: JIT compilers", re.compile(r"^(C1|C2) Compiler")),
    ("JVM: VM thread, safepoints, JFR", re.compile(r"^(VM Thread|JFR |Sweeper|Service Thread|Monitor Defl|"
                                                   r"Notification|Signal Disp|Common-Cleaner)")),
    ("librdkafka threads (Python's Kafka clients)", re.compile(r"^rdk:")),
]


def jvm_component(thread: str, frames: list[str]) -> str:
    for component, pattern in _JVM_THREADS:
        if pattern.search(thread):
            return component
    for frame in reversed(frames):
        for component, pattern in _JVM_FRAMES:
            if pattern.search(frame):
                return component
    return "JVM: other Java code"


def native_component(thread: str) -> str:
    """A thread with CPU time but no sample: named by what it is."""
    for component, pattern in _NATIVE_THREADS:
        if pattern.search(thread):
            return component
    return f"unsampled thread: {re.sub(r'[0-9#-]+$', '', thread) or thread}"


# A py-spy frame is "function (path/to/file.py:line)".
_PY_FILE = re.compile(r"\(([^():]+\.py):\d+\)$")


def python_component(thread: str, frames: list[str]) -> str:
    """A driver thread (dr-stream names every one), and within it, py4j's round trips apart."""
    name = re.sub(r"^Thread-\d+.*", "py4j callback or pool thread", thread)
    for frame in reversed(frames):
        found = _PY_FILE.search(frame)
        if found and "/py4j/" in f"/{found.group(1)}":
            return f"driver: {name}: py4j"
    return f"driver: {name}"
