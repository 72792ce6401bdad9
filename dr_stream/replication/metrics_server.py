"""The flow's HTTP endpoint: `/metrics` (Prometheus text format) and `/healthz` (JSON).

A daemon thread of the driver serving from what `FlowMetrics` holds: a scrape reads memory and
never waits on a cluster or on Spark, so it answers in milliseconds even while the flow is
stuck, which is exactly when it is read. `/healthz` answers 200 or 503 with a JSON body that
says why (`health.judge`); Kubernetes uses it as liveness and readiness probe.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from dr_stream.replication.flow_metrics import FlowMetrics


class MetricsServer:
    """Serves one flow's metrics on host:port until `close`."""

    def __init__(self, metrics: FlowMetrics, host: str, port: int, health_window_s: float,
                 idle_timeout_s: float = 10.0) -> None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(metrics)
        window = health_window_s

        class Handler(BaseHTTPRequestHandler):
            # A client that connects and sends nothing (or trickles) holds a thread, not the flow:
            # its socket gives up after `idle_timeout_s`.
            timeout = idle_timeout_s

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, CONTENT_TYPE_LATEST, generate_latest(registry))
                elif path == "/healthz":
                    health = metrics.health(window)
                    self._send(200 if health.ok else 503, "application/json",
                               json.dumps({"flow": metrics.flow, **health.as_dict()}).encode())
                else:
                    self._send(404, "text/plain", b"not found: try /metrics or /healthz\n")

            def _send(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:  # a line per scrape would flood the console
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"metrics-{metrics.flow}",
                                        daemon=True)

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
