"""The flow's metrics endpoint answers scrapes and lets go of a client that sends nothing."""

from __future__ import annotations

import socket
import time
import urllib.request

from dr_stream.replication.flow_metrics import FlowMetrics
from dr_stream.replication.metrics_server import MetricsServer


def test_a_client_that_connects_and_sends_nothing_is_let_go_and_scrapes_still_answer():
    server = MetricsServer(FlowMetrics("f", "f-replicate"), "127.0.0.1", 0, 60.0, idle_timeout_s=0.5).start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as idle:
            started = time.monotonic()
            assert idle.recv(1) == b""  # the server closed it
            assert time.monotonic() - started < 3
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as page:
            assert page.status == 200
    finally:
        server.close()
