"""A Spark action with a deadline: past it, every job the action started is cancelled.

A flow's restart reads the destination past its offset index before it copies anything; a
slow cluster must not hold the copy back without end. Spark has no timeout on an action, so the
action runs in a job group of its own that a timer cancels.

Invariant: once `within` returns or raises, no job of its group runs on, and the calling
thread's later jobs are not in the group (its local properties are cleared).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import TypeVar

from pyspark.sql import SparkSession

T = TypeVar("T")


class JobTimedOut(RuntimeError):
    """A Spark action given a deadline did not finish by it and was cancelled."""


def within(spark: SparkSession, seconds: float, action: Callable[[], T]) -> T:
    """action() with every Spark job it starts cancelled once `seconds` have passed (JobTimedOut).
    The cancel is repeated until the action returns: a job submitted only after the deadline
    (a slow first job in a cold session) is cancelled too."""
    context = spark.sparkContext
    group = f"dr-stream-bounded-{uuid.uuid4().hex}"
    done, expired = threading.Event(), threading.Event()

    def cancel_after_deadline() -> None:
        if done.wait(seconds):
            return
        expired.set()
        while not done.is_set():
            context.cancelJobGroup(group)
            done.wait(0.5)

    context.setJobGroup(group, "bounded read", interruptOnCancel=True)
    canceller = threading.Thread(target=cancel_after_deadline, name="job-deadline", daemon=True)
    canceller.start()
    try:
        return action()
    except Exception as exc:
        if expired.is_set() and "cancel" in str(exc).lower():
            raise JobTimedOut(f"cancelled after {seconds:.0f} s") from None
        raise
    finally:
        done.set()
        canceller.join()
        # The group's description too, or the thread's next jobs are shown as the bounded read.
        for job_property in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            context.setLocalProperty(job_property, None)
