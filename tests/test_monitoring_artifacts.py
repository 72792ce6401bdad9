"""The committed dashboard, alert rules, Spark metrics file and Kubernetes probes agree with what
a flow exposes (no Prometheus or Grafana runs here: these checks are what can be known without)."""

from __future__ import annotations

import json
import re

import yaml

from dr_stream.core.config import parse_flow
from dr_stream.replication.flow_metrics import FlowMetrics
from dr_stream.runtime.paths import project_root

DEPLOY = project_root() / "deploy"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def exposed() -> set[str]:
    metrics = FlowMetrics("f", "q")
    metrics.drilled(True, {"topics": 0})  # the drill's series appear once a periodic drill ran
    metrics.acls_synced(0, 0, {})  # and the ACL sync's once a pass ran
    return {f.name + suffix for f in metrics.collect() for suffix in SUFFIXES[f.type]}


def used(text: str) -> set[str]:
    return set(re.findall(r"\bdr_stream_[a-z_]+", text))


def test_every_metric_the_dashboard_draws_is_one_a_flow_exposes():
    dashboard = json.loads((DEPLOY / "grafana" / "dr-stream-dashboard.json").read_text())
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    assert used(exprs) and used(exprs) <= exposed()
    assert {"dr_stream_lag_records", "dr_stream_lag_seconds", "dr_stream_replication_latency_seconds_bucket",
            "dr_stream_translation_age_seconds", "dr_stream_drill_ready"} <= used(exprs)


def test_every_alert_rule_uses_exposed_metrics_and_says_what_fired():
    rules = yaml.safe_load((DEPLOY / "prometheus" / "dr-stream-alerts.yaml").read_text())["groups"][0]["rules"]
    assert len(rules) >= 6
    for rule in rules:
        assert used(rule["expr"]) <= exposed(), rule["alert"]
        assert rule["labels"]["severity"] in ("page", "ticket") and rule["annotations"]["summary"]


def test_the_operating_guide_names_every_alert_rule_and_the_metrics_reference_every_metric():
    guide = (project_root() / "docs" / "operating.md").read_text()
    rules = yaml.safe_load((DEPLOY / "prometheus" / "dr-stream-alerts.yaml").read_text())["groups"][0]["rules"]
    assert [r["alert"] for r in rules if f"`{r['alert']}`" not in guide] == []
    reference = (project_root() / "docs" / "reference" / "metrics.md").read_text()
    families = {f.name + ("_total" if f.type == "counter" else "") for f in FlowMetrics("f", "q").collect()}
    assert sorted(m for m in families if f"`{m}`" not in reference) == []


def test_the_spark_metrics_file_configures_the_prometheus_servlet_the_session_sets():
    text = (project_root() / "conf" / "metrics.properties").read_text()
    assert "*.sink.prometheusServlet.class=org.apache.spark.metrics.sink.PrometheusServlet" in text
    assert "*.sink.prometheusServlet.path=/metrics/prometheus" in text


def test_the_kubernetes_driver_is_probed_and_scraped_on_the_flows_metrics_port():
    text = (DEPLOY / "kubernetes" / "spark-application.yaml").read_text()
    documents = {d["kind"]: d for d in yaml.safe_load_all(text)}
    flow = parse_flow(yaml.safe_load(documents["ConfigMap"]["data"]["flow.yaml"].replace("${env:", "${")))
    driver = documents["SparkApplication"]["spec"]["driver"]
    container = driver["template"]["spec"]["containers"][0]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": flow.metrics.port}
    assert driver["ports"][0]["containerPort"] == flow.metrics.port
    assert driver["annotations"]["prometheus.io/port"] == str(flow.metrics.port)
