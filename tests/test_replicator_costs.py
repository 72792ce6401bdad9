"""The bench's memory figure: a process tree's resident memory, each page of a process counted
once, however its children were started."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.replicators import CostSampler, _kill, process_tree, resident_counted

JAVA = ("/usr/bin/java", b"java\x00-cp\x00spark.jar\x00")
CHMOD = ("/usr/bin/chmod", b"chmod\x00600\x00/tmp/x\x00")


def test_a_child_still_running_its_parents_program_is_not_counted_again():
    tree = [(10, None), (11, 10), (12, 10)]
    assert resident_counted(tree, {10: JAVA, 11: JAVA, 12: CHMOD}) == [10, 12]


def test_the_root_and_children_with_programs_of_their_own_are_counted():
    tree = [(1, None), (2, 1), (3, 2)]
    python = ("/usr/bin/python3", b"python\x00-m\x00dr_stream.cli\x00")
    assert resident_counted(tree, {1: python, 2: JAVA, 3: CHMOD}) == [1, 2, 3]
    assert resident_counted(tree, {1: JAVA, 2: JAVA, 3: None}) == [1, 3]  # 3 gone: its usage is read as none


def test_a_process_that_forks_a_copy_of_itself_is_measured_at_its_own_size():
    # 300 MB touched, then a fork that keeps running the same program: the pages are shared
    program = ("import os, time\nx = bytearray(300 * 2**20)\nx[::4096] = b'1' * len(x[::4096])\n"
               "pid = os.fork()\ntime.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-c", program], start_new_session=True)
    try:
        sampler = CostSampler(proc.pid)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and sampler.peak_rss < 300 * 2**20:
            sampler.sample()
            time.sleep(0.1)
        time.sleep(0.5)
        sampler.sample()
        assert 300 * 2**20 <= sampler.peak_rss < 450 * 2**20
    finally:
        _kill(process_tree(proc.pid))
        proc.wait(10)


def test_a_replicator_given_cpus_runs_its_whole_tree_on_them_and_one_given_none_on_every_cpu(tmp_path):
    from bench.replicators import Replicator

    # a parent that starts a child: the child must inherit the parent's CPUs
    program = ("import subprocess, sys, time\n"
               "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\ntime.sleep(30)\n")
    pinned = Replicator("pinned", [sys.executable, "-c", program], {}, tmp_path / "pinned.log", cpus=frozenset({0}))
    free = Replicator("free", [sys.executable, "-c", "import time; time.sleep(30)"], {}, tmp_path / "free.log")
    pinned.start()
    free.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(process_tree(pinned.proc.pid)) < 2:
            time.sleep(0.1)
        tree = process_tree(pinned.proc.pid)
        assert len(tree) == 2
        assert [os.sched_getaffinity(pid) for pid in tree] == [{0}, {0}]
        assert os.sched_getaffinity(free.proc.pid) == os.sched_getaffinity(0)
    finally:
        pinned.stop(timeout=5)
        free.stop(timeout=5)
