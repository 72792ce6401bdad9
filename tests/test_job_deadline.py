"""A Spark action with a deadline returns its result within it and leaves the thread's later
jobs alone (the cancel past the deadline is exercised on a real destination scan, in
tests/index/test_resume_scan.py)."""

from __future__ import annotations

import pytest

from dr_stream.runtime.job_deadline import within

pytestmark = pytest.mark.integration


def test_an_action_within_its_deadline_returns_its_result_and_leaves_no_job_group(spark):
    assert within(spark, 30.0, lambda: spark.range(5).count()) == 5
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None


def test_an_action_that_fails_within_its_deadline_raises_its_own_error(spark):
    with pytest.raises(ValueError, match="not a deadline"):
        within(spark, 30.0, lambda: (_ for _ in ()).throw(ValueError("not a deadline")))
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None
