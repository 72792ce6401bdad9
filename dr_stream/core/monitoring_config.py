"""What a running flow reports about itself: `metrics:` (its endpoint) and `drill:` (its readiness
drill), declared here as key tables (`config_def`) beside the dataclasses they fill, so `config`
stays about what the flow copies and translates. The flow file is read in one place
(`config_def`), from these tables and `config`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from dr_stream.core.config_def import Count, Key, Period, Read, Section, Text, Texts, default_of

METRICS_KEYS = (
    Key("port", Count(1), "serve `/metrics` and `/healthz` on this port (`dr-stream run --metrics-port` overrides "
        "it); not set: no endpoint", None),
    Key("host", Text(), "the address it listens on", "0.0.0.0"),
    Key("health_window", Period(), "`/healthz` answers 503 when a query made no progress for this long; at least "
        "twice `sample_interval`", "60s"),
    Key("sample_interval", Period(), "how often lag is measured, both clusters probed and a lag sample recorded "
        "(also soon after each batch, at most once a second)", "5s"),
    Key("spark_ui_port", Count(1), "`dr-stream run` only: Spark's UI on this port, with Spark's own metrics at "
        "`/metrics/prometheus/`; not set: no UI", None),
)


def _probed_in_window(got: Read) -> tuple[str, str] | None:
    window, sample = got.values["health_window_s"], got.values["sample_interval_s"]
    if sample <= 0 or window < 2 * sample:
        return "health_window", (f"{window:g}s must be at least twice sample_interval ({sample:g}s): the clusters "
                                 "are probed once per sample")
    return None


@dataclass(frozen=True)
class MetricsConfig:
    """What `dr-stream run` serves for monitoring. `port` None: no endpoint."""

    port: int | None = None
    host: str = default_of(METRICS_KEYS, "host")
    health_window_s: float = default_of(METRICS_KEYS, "health_window")
    sample_interval_s: float = default_of(METRICS_KEYS, "sample_interval")
    spark_ui_port: int | None = None


METRICS = Section("metrics", "What a running flow serves for monitoring ([operating](../operating.md)).",
                  METRICS_KEYS, (_probed_in_window,), MetricsConfig)

# A drill reads both clusters' topics, every selected group and the flow's tables: more often
# than this it would cost the clusters more than the copy does at rest.
MIN_DRILL_INTERVAL_S = 60.0

DRILL_KEYS = (
    Key("rpo", Period(), "the readiness drill's RPO: the oldest record not copied yet may be this old (`drill "
        "--rpo-seconds` overrides it)", "60s"),
    Key("max_translation_age", Period(), "the longest a group that moved on the source may wait for its translation "
        "(`drill --max-translation-age`)", "60s"),
    Key("interval", Period(MIN_DRILL_INTERVAL_S, "each drill reads every selected topic and group on both clusters"),
        "the running flow drills itself this often (`1h` is typical) and exports the verdict as metrics; the first "
        "drill runs one `metrics.health_window` after the start. Not set: only `dr-stream drill`", None),
    Key("losses_since", Period(), "a loss recorded this recently fails the drill (`drill --losses-since`)", "7d"),
    Key("spark_checkpoints", Texts(), "Spark Structured Streaming checkpoints (URIs) of queries that read the source: "
        "the drill fails unless each would move exactly (`failover --spark-checkpoint --dry-run`)", []),
)


def _longer_than_zero(got: Read) -> tuple[str, str] | None:
    for key in ("rpo", "max_translation_age"):
        if got.values[f"{key}_s"] <= 0:
            return key, "must be longer than 0s"
    return None


@dataclass(frozen=True)
class DrillConfig:
    """The readiness drill's limits, for `dr-stream drill` and for the flow that runs it itself.

    A flow is ready for failover when no partition's copy is older than `rpo_s` and no group
    that moved on the source waits longer than `max_translation_age_s` for its translation.
    `interval_s`: how often the running flow drills itself and exports the verdict as metrics;
    None leaves the drill to the command. A loss recorded in the last `losses_since_s` fails
    the drill: the destination misses those records. `spark_checkpoints`: the applications'
    checkpoints whose Kafka offsets must translate exactly now.
    """

    rpo_s: float = default_of(DRILL_KEYS, "rpo")
    max_translation_age_s: float = default_of(DRILL_KEYS, "max_translation_age")
    interval_s: float | None = None
    losses_since_s: float = default_of(DRILL_KEYS, "losses_since")
    spark_checkpoints: tuple[str, ...] = ()


DRILL = Section("drill", "The readiness drill's limits ([runbook](../runbook.md)).", DRILL_KEYS,
                (_longer_than_zero,), DrillConfig)
