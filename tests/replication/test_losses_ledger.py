"""The ledger of losses keeps what still matters: an entry written by the flow (through Spark)
leaves once it is older than a month and the destination holds nothing from before it, and the
rest reads as before. (Real Spark and delta-rs on local disk.)"""

from __future__ import annotations

import datetime as dt

import pytest

from dr_stream.replication.losses import KEPT_S, Loss, LossLedger
from dr_stream.runtime.delta_reads import DeltaReads

pytestmark = pytest.mark.integration


def test_an_entry_that_outlived_the_destination_s_copies_leaves_and_the_others_read_as_before(spark, tmp_path):
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    old = now - dt.timedelta(seconds=KEPT_S + 3600)
    ledger = LossLedger(str(tmp_path / "losses"), DeltaReads(lambda: spark), latest=True, retention_s=60)
    outlived = Loss("t", 0, 10, 19, 10, "retention", old)
    matters = Loss("t", 0, 60, 69, 10, "retention", old)  # the destination still holds copies from before it
    young = Loss("t", 0, 20, 29, 10, "retention", now)
    ledger.append(spark, [outlived, matters, young])

    dropped = ledger.keep(now, {("t", 0): 40}, {}, {"t"}, lambda topic: topic)

    assert dropped == [outlived]
    assert ledger.read() == [matters, young]
    assert ledger.keep(now, {("t", 0): 40}, {}, {"t"}, lambda topic: topic) == []  # nothing more to drop
