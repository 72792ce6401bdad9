"""`make profile`'s rules: which component a sample belongs to, how a thread's exact CPU time is
split over its samples, how the recorders' files are read, and the flame graph they draw."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from bench.cpu_components import jvm_component, native_component, python_component
from bench.cpu_profile import ENDED, ThreadTime, attribute, read_folded, read_py_spy
from bench.flame_graph import flame_graph_svg

TASK = "Executor task launch worker for task 1.0 in stage 3.0 (TID 7)"
SINK = ["java.lang.Thread.run", "org.apache.spark.sql.kafka010.KafkaWriteTask.execute",
        "org.apache.spark.sql.kafka010.KafkaRowWriter.sendRow"]


def test_the_frame_nearest_the_leaf_that_a_rule_knows_decides():
    json_in_sink = [*SINK, "org.apache.spark.sql.catalyst.expressions.StructsToJson.nullSafeEval",
                    "com.fasterxml.jackson.core.json.WriterBasedJsonGenerator.writeString", "java.lang.String.length"]
    assert jvm_component(TASK, json_in_sink) == "record path: JSON (provenance header)"
    assert jvm_component(TASK, SINK) == "sink: row -> producer record"
    copy = ["java.lang.Thread.run", "io.drstream.spark.CopyWriter.write", "io.drstream.kafka.CopyProducer$Copying.send"]
    assert jvm_component(TASK, copy) == "sink: row -> producer record"
    assert jvm_component(TASK, [*copy, "io.drstream.kafka.ProvenanceWriter.provenance"]) == "sink: provenance header"
    assert jvm_component(TASK, ["java.lang.Thread.run", "io.drstream.spark.CopyWriter.commit",
                                "io.drstream.kafka.RunPublisher.publish"]) == "sink: copy runs"


def test_a_producers_sender_thread_counts_as_the_producer_whatever_its_stack():
    network = ["org.apache.kafka.clients.NetworkClient.poll"]
    assert jvm_component("kafka-producer-network-thread | producer-1", network) == "producer"
    assert jvm_component(TASK, network) == "Kafka client: network"
    assert jvm_component(TASK, ["java.lang.Thread.run"]) == "JVM: other Java code"


def test_threads_without_samples_are_named_by_what_they_are():
    assert native_component("GC Thread#1") == "JVM: garbage collection"
    assert native_component("C2 CompilerThre") == "JVM: JIT compilers"
    assert native_component("rdk:broker1") == "librdkafka threads (Python's Kafka clients)"
    assert native_component("Executor task l") == "unsampled thread: Executor task l"


def test_a_driver_thread_keeps_its_name_and_its_py4j_round_trips_apart():
    frames = ["run (dr_stream/offsets/poller.py:10)", "__call__ (py4j/java_gateway.py:1322)"]
    assert python_component("poller-bench", frames) == "driver: poller-bench: py4j"
    assert python_component("poller-bench", frames[:1]) == "driver: poller-bench"
    assert python_component("Thread-12 (run)", frames[:1]) == "driver: py4j callback or pool thread"


def _times(**cpu: tuple[str, str, float]) -> dict[tuple[int, int], ThreadTime]:
    return {(1 if kind == "python" else 2, int(tid[1:])): ThreadTime(kind, name, s)
            for tid, (kind, name, s) in cpu.items()}


def test_a_threads_cpu_time_is_split_over_its_samples_and_unsampled_threads_count_whole():
    before = (_times(t10=("jvm", "Executor task l", 5.0), t11=("jvm", "GC Thread#0", 1.0)),
              {2: ("jvm", 6.0)})
    after = (_times(t10=("jvm", "Executor task l", 9.0), t11=("jvm", "GC Thread#0", 2.5),
                    t12=("python", "python", 0.5)),
             {1: ("python", 0.5), 2: ("jvm", 12.0)})
    sampled = {10: Counter({(TASK, tuple(SINK)): 3,
                            (TASK, ("org.apache.kafka.clients.producer.KafkaProducer.send",)): 1}),
               12: Counter({("poller-bench", ("run (dr_stream/offsets/poller.py:10)",)): 5})}
    cpu = attribute(before, after, sampled)
    assert cpu["sink: row -> producer record"] == pytest.approx(3.0)
    assert cpu["producer"] == pytest.approx(1.0)
    assert cpu["JVM: garbage collection"] == pytest.approx(1.5)
    assert cpu["driver: poller-bench"] == pytest.approx(0.5)
    # 6 CPU-seconds for the JVM, 5.5 on its living threads: the rest went to threads now gone
    assert cpu[f"jvm: {ENDED}"] == pytest.approx(0.5)
    assert sum(cpu.values()) == pytest.approx(6.5)


def test_the_recorders_files_are_read_per_os_thread():
    folded = read_folded(["10\tkafka-producer-network-thread | p-1\ta.B.c;d.E.f\t7\n", "bad line\n"])
    assert folded == {10: Counter({("kafka-producer-network-thread | p-1", ("a.B.c", "d.E.f")): 7})}
    spied = read_py_spy(["thread (4242): poller-bench;run (a.py:1);poll (b.py:2) 9\n", "garbage\n"])
    assert spied == {4242: Counter({("poller-bench", ("run (a.py:1)", "poll (b.py:2)")): 9})}


def test_a_flame_graphs_boxes_are_as_wide_as_their_samples():
    svg = flame_graph_svg([(["root", "left"], 3), (["root", "right"], 1)], "t")
    widths = {m.group(1): float(m.group(2)) for m in re.finditer(r"<title>(\w+) \(.*?width=\"([\d.]+)\"", svg)}
    assert widths["root"] == pytest.approx(1200.0)
    assert widths["left"] == pytest.approx(3 * widths["right"])


def test_a_box_narrower_than_a_pixel_is_left_out():
    svg = flame_graph_svg([(["a"], 10_000), (["b"], 1)], "t")
    assert "<title>a " in svg and "<title>b " not in svg


@pytest.mark.integration  # starts two JVMs
def test_the_jfr_folder_writes_each_windows_samples(tmp_path: Path):
    """JfrStacks.java against a real recording of a busy JVM."""
    program = tmp_path / "Busy.java"
    # The clock is read once per million iterations: a loop that reads it every turn spends most
    # of its time in the clock call, where the recorder cannot walk the stack, and so was left
    # with a handful of samples and sometimes none in Busy's own frames.
    program.write_text("public class Busy { public static void main(String[] a) { long x = 0; "
                       "long end = System.currentTimeMillis() + 1500; while (System.currentTimeMillis() < end) "
                       "{ for (int i = 0; i < 1000000; i++) { x += spin(x); } } System.out.println(x); } "
                       "static long spin(long x) { return (x * 31) % 1000003; } }")
    recording = tmp_path / "busy.jfr"
    subprocess.run(["java", f"-XX:StartFlightRecording=filename={recording},settings=profile", str(program)],
                   check=True, capture_output=True, timeout=120)
    script = Path(__file__).resolve().parents[1] / "bench" / "JfrStacks.java"
    subprocess.run(["java", str(script), str(recording), str(tmp_path / "out"), "all=0:99999999999999",
                    "none=0:1"], check=True, capture_output=True, timeout=120)
    folded = read_folded((tmp_path / "out" / "all.folded").read_text().splitlines())
    busy = sum(n for samples in folded.values() for (thread, stack), n in samples.items()
               if thread == "main" and stack[-1] in ("Busy.spin", "Busy.main"))
    assert busy >= 20, f"{busy} samples in Busy's frames, about 150 expected"
    assert (tmp_path / "out" / "none.folded").read_text() == ""


def test_a_stack_deeper_than_pythons_recursion_limit_is_drawn():
    # The recorder keeps stacks 512 frames deep; Spark's planner goes past 128.
    deep = [f"frame{i}" for i in range(2_000)]
    svg = flame_graph_svg([(deep, 5)], "t")
    assert "frame1999 (5 samples" in svg
