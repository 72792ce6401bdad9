"""What a running flow reports about itself: its metrics endpoint and its readiness drill.

`metrics:` and `drill:` of the flow file, read and checked here so that `config` stays about
what the flow copies and translates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dr_stream.core.config_reader import YamlReader


@dataclass(frozen=True)
class MetricsConfig:
    """What `dr-stream run` serves for monitoring. `port` None: no endpoint."""

    port: int | None = None
    host: str = "0.0.0.0"
    # /healthz answers 503 when a query has made no progress for this long.
    health_window_s: float = 60.0
    # How often lag is measured, the clusters probed and a lag sample recorded for `status --plot`.
    sample_interval_s: float = 5.0
    # Spark's UI (and its Prometheus servlet at /metrics/prometheus/) on this port; None: no UI.
    spark_ui_port: int | None = None


@dataclass(frozen=True)
class DrillConfig:
    """The readiness drill's limits, for `dr-stream drill` and for the flow that runs it itself.

    A flow is ready for failover when no partition's copy is older than `rpo_s` and no group
    that moved on the source waits longer than `max_translation_age_s` for its translation.
    `interval_s`: how often the running flow drills itself and exports the verdict as metrics;
    None (the default) leaves the drill to the command. A loss recorded in the last
    `losses_since_s` fails the drill: the destination misses those records.
    """

    rpo_s: float = 60.0
    max_translation_age_s: float = 60.0
    interval_s: float | None = None
    losses_since_s: float = 7 * 24 * 3600.0


def read_metrics(r: YamlReader, raw: Any) -> MetricsConfig:
    m = r.mapping(raw, "metrics", {"port", "host", "health_window", "sample_interval", "spark_ui_port"})
    health_window = r.duration_s(m, "health_window", "metrics", "60s")
    sample_interval = r.duration_s(m, "sample_interval", "metrics", "5s")
    if sample_interval <= 0 or health_window < 2 * sample_interval:
        raise r.fail("metrics.health_window", f"{health_window:g}s must be at least twice sample_interval "
                                              f"({sample_interval:g}s): the clusters are probed once per sample")
    return MetricsConfig(port=r.integer(m, "port", "metrics", None, 1), host=r.string(m, "host", "metrics", "0.0.0.0"),
                         health_window_s=health_window, sample_interval_s=sample_interval,
                         spark_ui_port=r.integer(m, "spark_ui_port", "metrics", None, 1))


# A drill reads both clusters' topics, every selected group and the flow's tables: more often
# than this it would cost the clusters more than the copy does at rest.
MIN_DRILL_INTERVAL_S = 60.0


def read_drill(r: YamlReader, raw: Any) -> DrillConfig:
    d = r.mapping(raw, "drill", {"rpo", "max_translation_age", "interval", "losses_since"})
    rpo = r.duration_s(d, "rpo", "drill", "60s")
    age = r.duration_s(d, "max_translation_age", "drill", "60s")
    for key, value in (("rpo", rpo), ("max_translation_age", age)):
        if value <= 0:
            raise r.fail(f"drill.{key}", "must be longer than 0s")
    interval = r.duration_s(d, "interval", "drill", "1h") if "interval" in d else None
    if interval is not None and interval < MIN_DRILL_INTERVAL_S:
        raise r.fail("drill.interval", f"{interval:g}s is shorter than {MIN_DRILL_INTERVAL_S:g}s: each drill reads "
                                       "every selected topic and group on both clusters")
    return DrillConfig(rpo, age, interval, r.duration_s(d, "losses_since", "drill", "7d"))
