"""`python -m bench.client_bytecode`: the hot methods of two kafka-clients jars, in bytecode bytes.

    python -m bench.client_bytecode [OLD_JAR NEW_JAR]

With no arguments it compares the compatibility brokers' client (3.x) with the brokers' (4.x),
the two MirrorMaker 2s that `make profile --only "MirrorMaker 2 3.x"` runs side by side. It
prints each jar's class-file version and, for the methods every copied record passes through
(the consumer's record parse, the producer's append and send), their bytecode length in each.

Why the length: HotSpot's C2 inlines a hot callee only while its bytecode is under
`FreqInlineSize` (325 bytes on x86-64), so a method that shrinks under it stops costing a call
per record and lets the compiler optimise across it. Kafka's clients target Java 11 from 4.0 on,
where `javac` turns each string concatenation into one `invokedynamic` instead of a chain of
`StringBuilder` calls: the error messages in the per-record checks no longer weigh on the methods
that hold them.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from dr_stream.runtime.jvm import JvmPins, jar_dir

FREQ_INLINE_SIZE = 325

# (class in 3.x, class in 4.x, methods): the record package moved to `record.internal` in 4.x.
HOT_METHODS: list[tuple[str, str, tuple[str, ...]]] = [
    ("org.apache.kafka.common.record.DefaultRecord", "org.apache.kafka.common.record.internal.DefaultRecord",
     ("readFrom", "readHeaders", "writeTo", "sizeOfBodyInBytes")),
    ("org.apache.kafka.common.record.MemoryRecordsBuilder",
     "org.apache.kafka.common.record.internal.MemoryRecordsBuilder",
     ("appendWithOffset", "appendDefaultRecord", "recordWritten")),
    ("org.apache.kafka.clients.consumer.internals.CompletedFetch",
     "org.apache.kafka.clients.consumer.internals.CompletedFetch", ("fetchRecords", "nextFetchedRecord")),
    ("org.apache.kafka.clients.producer.KafkaProducer", "org.apache.kafka.clients.producer.KafkaProducer",
     ("doSend",)),
    ("org.apache.kafka.clients.producer.internals.RecordAccumulator",
     "org.apache.kafka.clients.producer.internals.RecordAccumulator", ("append", "tryAppend")),
]

_METHOD = re.compile(r"^  [^(]*?(\w+)\((.*)\)[^;]*;$")
_INSTRUCTION = re.compile(r"^\s+(\d+): (\w+)")


@dataclass(frozen=True)
class MethodSize:
    method: str
    bytes: int


def method_sizes(jar: Path, class_name: str) -> list[MethodSize]:
    """Each method of `class_name` with its bytecode length (the last instruction's offset plus
    one: close enough to compare two builds of the same source), overloads apart."""
    listing = subprocess.run(["javap", "-c", "-p", "-cp", str(jar), class_name],
                             capture_output=True, text=True, check=True).stdout
    sizes: list[MethodSize] = []
    name, last = None, -1
    for line in listing.splitlines():
        declared = _METHOD.match(line)
        if declared:
            if name is not None and last >= 0:
                sizes.append(MethodSize(name, last + 1))
            plain = re.sub(r"<[^<>]*>", "", re.sub(r"<[^<>]*>", "", declared.group(2)))  # generics, two deep
            parameters = ", ".join(p.rsplit(".", 1)[-1] for p in plain.split(", ") if p)
            name, last = f"{declared.group(1)}({parameters})", -1
            continue
        instruction = _INSTRUCTION.match(line)
        if instruction and name is not None:
            last = int(instruction.group(1))
    if name is not None and last >= 0:
        sizes.append(MethodSize(name, last + 1))
    return sizes


def class_file_version(jar: Path, class_name: str) -> int:
    """The major class-file version (52: Java 8, 55: Java 11) of one class in `jar`."""
    with zipfile.ZipFile(jar) as archive:
        header = archive.read(class_name.replace(".", "/") + ".class")[:8]
    return int.from_bytes(header[6:8], "big")


def report(old: Path, new: Path) -> list[str]:
    first_old, first_new = HOT_METHODS[0][0], HOT_METHODS[0][1]
    lines = [f"class-file version: {old.name} {class_file_version(old, first_old)}, "
             f"{new.name} {class_file_version(new, first_new)} (52: Java 8, 55: Java 11)",
             f"bytecode bytes of the per-record methods (C2 inlines a hot callee under {FREQ_INLINE_SIZE}):",
             f"| method | {old.name} | {new.name} |", "|---|---:|---:|"]
    for old_class, new_class, wanted in HOT_METHODS:
        before = {m.method: m.bytes for m in method_sizes(old, old_class)}
        after = {m.method: m.bytes for m in method_sizes(new, new_class)}
        for method in sorted(set(before) & set(after)):
            if method.split("(")[0] in wanted:
                crossed = " (now inlinable)" if before[method] >= FREQ_INLINE_SIZE > after[method] else ""
                lines.append(f"| {old_class.rsplit('.', 1)[-1]}.{method} | {before[method]} | "
                             f"{after[method]}{crossed} |")
    return lines


def pinned_jars() -> tuple[Path, Path]:
    pins = JvmPins.load()
    return (jar_dir("kafka-compat") / f"kafka-clients-{pins.kafka_broker_compat}.jar",
            jar_dir("kafka") / f"kafka-clients-{pins.kafka_broker}.jar")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (0, 2):
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    old, new = (Path(args[0]), Path(args[1])) if args else pinned_jars()
    print("\n".join(report(old, new)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
