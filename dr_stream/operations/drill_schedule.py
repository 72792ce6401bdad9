"""The running flow's own readiness drill: `drill` every `drill.interval`, its verdict as metrics.

`dr-stream run` starts it beside the flow's threads when the flow file sets `drill.interval`.
Here the flow check is the flow's own `/healthz` rule rather than its lag samples. The first
drill runs once the flow has had a health window to copy and translate; a verdict is logged
when it changes (ready, or each failing check on its own line), so an hourly drill of a flow
that stays ready says so once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from dr_stream.core.config import FlowConfig
from dr_stream.operations.drill import drill
from dr_stream.operations.flow_tables import FlowTables
from dr_stream.operations.readiness import AREAS, Verdict, health_check
from dr_stream.replication.flow_metrics import FlowMetrics

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class DrillSchedule:
    def __init__(self, config: FlowConfig, metrics: FlowMetrics, spark: Callable[[], SparkSession] | None = None,
                 log: Callable[[str], None] = print) -> None:
        if config.drill.interval_s is None:
            raise ValueError(f"flow {config.name}: drill.interval is not set")
        self.config, self.metrics, self.spark, self.log = config, metrics, spark, log
        self._shown: list[str] | None = None

    def run(self, stop: threading.Event) -> None:
        if stop.wait(self.config.metrics.health_window_s):
            return
        while True:
            self.drill_once()
            if stop.wait(self.config.drill.interval_s):
                return

    def drill_once(self) -> Verdict:
        health = self.metrics.health(self.config.metrics.health_window_s)
        tables = FlowTables.of(self.config, self.spark, self.log)  # a fresh snapshot of both tables each time
        # The dry run's own lines (the index it read) would repeat every interval: only the verdict is said.
        verdict = drill(self.config, tables, flow_health=health_check(self.config.name, health.reasons),
                        log=lambda _: None)
        failed = {area: sum(1 for c in verdict.failures if c.area == area) for area in AREAS}
        self.metrics.drilled(verdict.ready, failed)
        shown = [c.line() for c in verdict.failures]
        if shown != self._shown:
            self._shown = shown
            if verdict.ready:
                self.log(f"drill: ready for failover ({len(verdict.checks)} checks)")
            for line in shown:
                self.log(f"drill: NOT READY: {line}")
        return verdict
