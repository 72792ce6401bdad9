"""The layout's rules, checked on the source: one place builds Kafka clients, no import circles,
wings depend one way; long modules and functions are a lint warning."""

from __future__ import annotations

import ast
import importlib
import sys
import types
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dr_stream"
CLIENT_CLASSES = {"AdminClient", "Consumer", "Producer", "RetryingAdmin", "RetryingConsumer"}
# Lower floors never import higher ones: the pure rules know nothing of Spark or clients, an
# operator command is not a dependency of the streaming runtime, and the Kafka wing knows nothing
# of what uses it. The offset index and group positions are two wings; positions build on the index.
LAYERS = ["core", "runtime", "kafka", "index", "positions", "replication", "operations", "dev"]
# What the core may import from outside the standard library: nothing that starts a JVM or
# opens a connection.
CORE_THIRD_PARTY = {"yaml"}
# Wings that show one public face: other wings import the package, never a module inside it.
FACED = ["index", "positions"]


def modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(path.read_text(), str(path))
    return out


def imports(tree: ast.Module) -> set[str]:
    """dr_stream modules imported anywhere in the module (function-level imports included)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dr_stream"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("dr_stream"))
    return found


def dependency_graph() -> dict[str, set[str]]:
    trees = modules()
    return {name: {m for m in imports(tree) if m in trees and m != name} for name, tree in trees.items()}


def test_only_the_kafka_clients_module_constructs_confluent_kafka_clients():
    builders = set()
    for name, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CLIENT_CLASSES:
                builders.add(name)
    assert builders == {"dr_stream.kafka.clients"}


def test_no_module_imports_itself_through_others():
    graph = dependency_graph()
    cycles = []

    def visit(node: str, path: list[str], done: set[str]) -> None:
        for nxt in sorted(graph[node]):
            if nxt in path:
                cycles.append([*path[path.index(nxt):], nxt])
            elif nxt not in done:
                visit(nxt, [*path, nxt], done)
        done.add(node)

    done: set[str] = set()
    for start in sorted(graph):
        if start not in done:
            visit(start, [start], done)
    assert cycles == []


@pytest.mark.parametrize("lower", LAYERS)
def test_a_wing_never_imports_a_wing_above_it(lower):
    above = LAYERS[LAYERS.index(lower) + 1:]
    wrong = {
        (name, dep) for name, deps in dependency_graph().items() if name.startswith(f"dr_stream.{lower}")
        for dep in deps if any(dep.startswith(f"dr_stream.{wing}") for wing in above)
    }
    assert wrong == set()


def test_top_level_helpers_import_no_floor():
    """What stays at the top (threads, loop pacing, failure notes, log format) serves every floor."""
    top = {n for n in modules() if n.count(".") == 1 and n.split(".")[1] not in LAYERS and n != "dr_stream.cli"}
    wrong = {(n, d) for n, deps in dependency_graph().items() if n in top for d in deps
             if any(d.startswith(f"dr_stream.{wing}") for wing in LAYERS)}
    assert wrong == set()


def _third_party(tree: ast.Module) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m not in {"dr_stream", "__future__"}}


def test_the_core_imports_no_spark_no_client_and_nothing_above_it():
    wrong = set()
    for name, tree in modules().items():
        if name.startswith("dr_stream.core"):
            wrong |= {(name, m) for m in _third_party(tree) - CORE_THIRD_PARTY}
            wrong |= {(name, d) for d in imports(tree) if not d.startswith("dr_stream.core")}
    assert wrong == set()


@pytest.mark.parametrize("wing", FACED)
def test_other_wings_reach_a_faced_wing_through_its_package_only(wing):
    inside = f"dr_stream.{wing}."
    wrong = {(name, dep) for name, deps in dependency_graph().items() if not name.startswith(inside)
             and name != f"dr_stream.{wing}" for dep in deps if dep.startswith(inside)}
    assert wrong == set()


def test_size_marks_are_a_warning_that_names_the_part_and_never_fails_lint(tmp_path):
    """Module size is a smell, not a law: lint prints what is long and exits 0."""
    from tools.module_sizes import FUNCTION_LINES, MODULE_LINES, long_parts, main

    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_LINES))
    (package / "big.py").write_text(f"def long_one():\n{body}\n" + "\n" * MODULE_LINES)
    (package / "small.py").write_text("def short():\n    return 1\n")
    assert [(p.where, p.mark) for p in long_parts(package)] == [("pkg/big.py", MODULE_LINES),
                                                              ("pkg/big.py:long_one", FUNCTION_LINES)]
    assert main([str(package)]) == 0


def test_the_wings_that_touch_state_paths_use_no_local_file_functions():
    """Checkpoints, the offset index and translations may be on HDFS or object storage, which
    os, shutil and pathlib cannot see; state_paths (Hadoop's FileSystem) and Delta can."""
    local = {"os", "shutil", "pathlib"}
    wrong = set()
    for name, tree in modules().items():
        if name.split(".")[1:2] not in (["index"], ["positions"], ["operations"], ["replication"]):
            continue
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) else [])
            wrong |= {(name, n) for n in names if n and n.split(".")[0] in local}
    assert wrong == set()


@pytest.mark.parametrize("wing", FACED)
def test_a_face_resolves_every_name_it_shows_and_none_is_a_module_name(wing):
    """A name on the face that is also a module of the wing would resolve to the module once the
    module was imported (Python sets it on the package), not to what the face promises."""
    face = importlib.import_module(f"dr_stream.{wing}")
    modules_inside = {p.stem for p in (PACKAGE / wing).glob("*.py")}
    assert set(face.__all__) & modules_inside == set()
    for name in face.__all__:
        assert not isinstance(getattr(face, name), types.ModuleType), name


def test_every_package_directory_has_an_init_so_the_wheel_carries_it():
    """setuptools' find_packages leaves out a directory without __init__.py: the wheel a YARN or
    Kubernetes driver runs from would lack it."""
    packages = [d for d in PACKAGE.rglob("*") if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py"))]
    missing = sorted(str(d.relative_to(PACKAGE.parent)) for d in packages if not (d / "__init__.py").exists())
    assert missing == []


def test_every_java_source_lives_under_jvm_and_is_built_there():
    """Java in the package would be run from its source on each start, built by no one, and
    tested by no build; jvm/ builds every Java source with `make setup`."""
    root = Path(__file__).resolve().parents[1]
    assert sorted(p.relative_to(root).as_posix() for p in (root / "dr_stream").rglob("*.java")) == []
    helper = root / "jvm" / "kafka4" / "src" / "main" / "java" / "io" / "drstream" / "kafka4" / "Kafka4Groups.java"
    assert helper.exists() and "package io.drstream.kafka4;" in helper.read_text()


def test_one_protocol_faces_every_group_offsets_stack_and_each_implements_it():
    from dr_stream.kafka.group_offsets import GroupOffsetsClient
    from dr_stream.kafka.group_offsets.consumer_groups import ConsumerGroupOffsets
    from dr_stream.kafka.group_offsets.java_admin import GroupOffsets
    from dr_stream.kafka.group_offsets.kafka4 import ShareGroupOffsets

    wanted = {name for name in dir(GroupOffsetsClient) if not name.startswith("_")}
    assert wanted == {"states", "committed", "commit", "expect", "close"}
    for stack in (GroupOffsets, ConsumerGroupOffsets, ShareGroupOffsets):
        assert wanted <= set(dir(stack)), stack.__name__



def test_a_group_offsets_stack_is_built_only_in_the_kafka_wing():
    """Which stack serves a caller is chosen in `group_offsets.stacks` (and the cluster context's
    own face); a module of another wing asks for one rather than building it."""
    builders = {name for name, tree in modules().items() for node in ast.walk(tree)
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ConsumerGroupOffsets"}
    assert builders == {"dr_stream.kafka.group_offsets.stacks", "dr_stream.kafka.cluster_context"}


# What builds a Kafka client in `kafka.clients` (the Java admin in the driver's JVM included).
CLIENT_BUILDERS = {"admin", "consumer", "producer", "consuming", "producing", "probe_admin", "group_offsets",
                   "OnDemandConsumer"}


def test_outside_the_kafka_wing_and_the_dev_tools_clients_come_only_from_a_cluster_context():
    """A part of a flow or a command asks its cluster's context for a client (a shared one, or one
    of its own); it never calls `clients` to build one, so how a cluster is reached and which
    client stack serves it stay decided in one wing."""
    builders = set()
    for name, tree in modules().items():
        if name.startswith(("dr_stream.kafka", "dr_stream.dev")):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "dr_stream.kafka.clients":
                builders.update(f"{name}: imports {a.name}" for a in node.names if a.name in CLIENT_BUILDERS)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in CLIENT_BUILDERS and getattr(node.func.value, "id", None) == "clients"):
                builders.add(f"{name}: clients.{node.func.attr}")
    assert builders == set()


def test_a_flow_is_made_at_one_site_and_everything_that_runs_one_goes_through_it():
    """The CLI, failback, the demo, the bench and the tests all call `build_flow`; only it calls
    the class, so a flow is wired one way wherever it runs."""
    root = PACKAGE.parent
    makers = set()
    for path in sorted([*root.glob("dr_stream/**/*.py"), *root.glob("tests/**/*.py"), *root.glob("bench/**/*.py"),
                        *root.glob("jobs/**/*.py")]):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ReplicationFlow":
                makers.add(str(path.relative_to(root)))
    assert makers == {"dr_stream/replication/flow.py"}
    users = {path.relative_to(root).as_posix() for path in root.glob("dr_stream/**/*.py")
             if "build_flow(" in path.read_text()}
    assert {"dr_stream/cli/flow_commands.py", "dr_stream/operations/failback.py", "dr_stream/dev/demo.py"} <= users


COMMAND_MODULES = ["dr_stream.cli", "dr_stream.cli.flow_commands", "dr_stream.cli.group_commands",
                   "dr_stream.cli.report_commands", "dr_stream.cli.held_commands"]


@pytest.mark.parametrize("module", COMMAND_MODULES)
def test_a_command_returns_an_exit_code_member_never_a_bare_number(module):
    """Every exit status a command gives is one `ExitCode` names (and `docs/` lists)."""
    returns = [node for node in ast.walk(modules()[module]) if isinstance(node, ast.Return)]
    bare = [node.lineno for node in returns
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, int)]
    assert bare == []
