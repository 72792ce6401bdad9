"""The task slots an application has, and the real-time mode's refusal when they are too few."""

from __future__ import annotations

import pytest

from dr_stream.replication.task_slots import shortfall, slots_needed, task_slots


@pytest.mark.parametrize(("conf", "slots"), [
    ({"spark.master": "local"}, 1),
    ({"spark.master": "local[4]"}, 4),
    ({"spark.master": "local[*]"}, 2),
    ({"spark.master": "local[6, 3]"}, 6),
    ({"spark.master": "local[4]", "spark.task.cpus": "2"}, 2),
    ({"spark.master": "local-cluster[2, 3, 1024]"}, 6),
    ({"spark.master": "yarn"}, 2),
    ({"spark.master": "yarn", "spark.executor.instances": "3", "spark.executor.cores": "4"}, 12),
    ({"spark.master": "k8s://https://api:6443", "spark.dynamicAllocation.enabled": "true",
      "spark.dynamicAllocation.maxExecutors": "5", "spark.executor.cores": "2"}, 10),
])
def test_slots_come_from_the_master_or_the_executors(conf, slots):
    assert task_slots(conf, host_cores=2) == slots


def test_realtime_mode_needs_a_slot_per_partition_and_one_for_the_driver_s_jobs():
    assert slots_needed(6) == 7
    assert shortfall(6, 7, "local[7]") is None


def test_the_refusal_says_what_is_needed_what_there_is_and_what_to_do():
    line = shortfall(6, 2, "local[2]")
    assert line.startswith("streaming.mode realtime needs 7 task slots (6 source partitions")
    assert "has 2 (master local[2])" in line and "local[7]" in line and "microbatch" in line
