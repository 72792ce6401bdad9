"""Every command against a cluster that is restarting: one line and an exit code, never a traceback.

A DR command runs when brokers have just restarted. Each command here runs twice: first at once
after the cluster's broker was stopped and started again (it may still be starting: the command
waits within its time or says in one line that the cluster does not answer), then right after
the broker answers again, when leaders and coordinators are still settling (the command must
ride through that and do its work). The flow itself (`dr-stream run`) rides through two restarts
of its source and copies what arrived meanwhile. The module starts its own two clusters (rs1,
rs2), because it restarts one.
"""

from __future__ import annotations

import datetime as dt
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dr_stream import cli
from dr_stream.dev.processes import loopback_listening
from dr_stream.exit_codes import ExitCode
from tests.clusters import started_cluster
from tests.flows import flow_config, flow_file, running_flow
from tests.kafka_tools import (
    committed,
    consume_and_commit,
    count,
    create_topic,
    produce,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration

PARTITIONS, RECORDS = 3, 300
VERDICTS = {ExitCode.OK, ExitCode.FAILED, ExitCode.ATTENTION, ExitCode.UNREACHABLE, ExitCode.USAGE}


@pytest.fixture(scope="module")
def rs1(cluster_home):
    yield from started_cluster(cluster_home, "rs1", 18092)


@pytest.fixture(scope="module")
def rs2(cluster_home):
    yield from started_cluster(cluster_home, "rs2", 18192)


def restart(cluster) -> None:
    """Stops the broker and starts it again, returning as soon as its port takes connections: it
    may not answer requests yet, or answer that its leaders and coordinators are not ready."""
    cluster.stop()
    cluster.launch()
    assert wait_until(lambda: loopback_listening(cluster.port), 60, interval=0.05), f"{cluster.alias} did not start"


def no_traceback(console: str) -> None:
    assert "Traceback" not in console, console[-4000:]
    assert not re.search(r'^\s+File "', console, re.M), console[-4000:]


def run_command(capfd, argv: list[str]) -> tuple[int, str]:
    code = cli.main(argv)
    out, err = capfd.readouterr()
    return code, out + err


@pytest.fixture(scope="module")
def estate(spark, rs1, rs2, tmp_path_factory):
    """A topic copied rs1 -> rs2 and a group's commits on rs1 synced there; the flows' files."""
    work = tmp_path_factory.mktemp("restarting")
    topic, group = unique("rs."), unique("rsg-")
    sections = {"topics": {"include": [re.escape(topic)]}, "offsets": {"groups": {"include": ["rsg-.*"]}}}
    fwd = flow_config(rs1, rs2, work, name="rs-fwd", **sections)
    back = flow_config(rs2, rs1, work, name="rs-back", **sections)
    create_topic(rs1.bootstrap, topic, partitions=PARTITIONS)
    produce(rs1.bootstrap, topic, ({"value": f"rs1-{p}-{i}".encode(), "partition": p}
                                   for p in range(PARTITIONS) for i in range(RECORDS)))
    upto = {p: 100 for p in range(PARTITIONS)}
    with running_flow(spark, fwd):
        assert wait_until(lambda: count(rs2.bootstrap, topic) == PARTITIONS * RECORDS, 180)
        consume_and_commit(rs1.bootstrap, topic, group, upto, helper=True)
        assert wait_until(lambda: committed(rs2.bootstrap, group, topic, PARTITIONS) == upto, 120)
    files = {}
    for name, config in (("fwd", fwd), ("back", back)):
        (work / name).mkdir()
        files[name] = flow_file(config, work / name, **sections)
    return {"topic": topic, "group": group, "fwd": files["fwd"], "back": files["back"], "work": work}


def commands(estate) -> list[tuple[list[str], set[ExitCode]]]:
    """Each command, and the exit codes it may end with once the cluster is back."""
    fwd, back, group, topic = estate["fwd"], estate["back"], estate["group"], estate["topic"]
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return [
        (["check-config", "--config", fwd, "--connect"], {ExitCode.OK}),
        (["status", "--config", fwd], {ExitCode.OK}),
        (["drill", "--config", fwd], {ExitCode.OK, ExitCode.ATTENTION}),  # no flow runs: a verdict
        (["translate", "--config", fwd, "--group", group], {ExitCode.OK}),
        (["losses", "--config", fwd], {ExitCode.OK}),
        (["failover", "--config", fwd, "--group", group, "--dry-run"], {ExitCode.OK}),
        (["reset-offsets", "--config", fwd, "--cluster", "rs1", "--group", unique("rsg-reset-"),
          "--to-datetime", now, "--dry-run"], {ExitCode.OK}),
        (["skip", "--config", fwd, "--topic", topic, "--partition", "0", "--offset", "5"], {ExitCode.USAGE}),
        (["failover", "--config", fwd, "--group", group], {ExitCode.OK}),
        (["failback", "--config", back, "--group", group, "--timeout", "300"], {ExitCode.OK}),
    ]


def test_every_command_on_a_restarting_cluster_says_one_line_and_works_once_it_is_back(estate, rs1, capfd):
    capfd.readouterr()
    said: list[str] = []
    for argv, expected in commands(estate):
        restart(rs1)
        code, console = run_command(capfd, argv)
        no_traceback(console)
        assert code in VERDICTS, f"{argv[0]} exited {code} while rs1 restarted:\n{console[-3000:]}"
        if code not in expected:
            failure = [line for line in console.splitlines() if line.startswith("dr-stream")]
            assert failure, f"{argv[0]} exited {code} without a dr-stream line:\n{console[-3000:]}"
        rs1.wait_ready()
        code, console = run_command(capfd, argv)
        no_traceback(console)
        assert code in expected, f"{argv[0]} exited {code} right after rs1 came back:\n{console[-3000:]}"
        said += [line for line in console.splitlines() if "was settling" in line]
    with capfd.disabled():  # what the commands waited for, in the run's output
        print("\n".join(["", *said]))


def test_a_flow_rides_through_its_source_restarting_and_copies_what_arrived_meanwhile(estate, rs1, rs2):
    topic = estate["topic"]
    before = count(rs2.bootstrap, topic)
    log = Path(estate["work"]) / "run.log"
    with open(log, "w") as out:
        flow = subprocess.Popen([sys.executable, "-m", "dr_stream.cli", "run", "--config", estate["fwd"]],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        assert wait_until(lambda: "replicate query running" in log.read_text(), 240), log.read_text()[-3000:]
        for round_ in range(2):
            restart(rs1)
            rs1.wait_ready()
            produce(rs1.bootstrap, topic, ({"value": f"rs1-new{round_}-{p}-{i}".encode(), "partition": p}
                                           for p in range(PARTITIONS) for i in range(50)))
        expected = before + 2 * PARTITIONS * 50
        assert wait_until(lambda: count(rs2.bootstrap, topic) == expected, 240), (
            f"{count(rs2.bootstrap, topic)} of {expected} on rs2\n{log.read_text()[-3000:]}")
    finally:
        flow.send_signal(signal.SIGTERM)
        flow.wait(timeout=120)
    assert flow.returncode == 0, log.read_text()[-3000:]
    no_traceback(log.read_text())
