"""The dev Kubernetes' relay between this machine's loopback and its network namespace, run as
`dev k8s up` runs it, in a namespace made for this test (root and `ip netns`, no Kubernetes)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from dr_stream.dev.netns import NetworkNamespace
from tests.kafka_tools import wait_until

pytestmark = pytest.mark.integration


def _echo(listener: socket.socket, tag: bytes) -> None:
    listener.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.sendall(tag + conn.recv(100))

    threading.Thread(target=serve, daemon=True).start()


def _ask(conn: socket.socket, port: int) -> bytes:
    """What answers on 127.0.0.1:`port` from where `conn` was made; b"" when nothing does: the
    connection is refused, or (the relay accepted it a moment before it learned that the port here
    closed) reset."""
    with conn:
        conn.settimeout(5)
        try:
            if conn.connect_ex(("127.0.0.1", port)) != 0:
                return b""
            conn.sendall(b"?")
            return conn.recv(100)
        except ConnectionError:
            return b""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def namespace() -> Iterator[NetworkNamespace]:
    made = NetworkNamespace("drs-relay-test")
    made.create()
    try:
        yield made
    finally:
        made.delete()
    assert not made.exists()


def test_the_relay_joins_this_machines_loopback_and_the_namespaces_and_nothing_else(
        namespace: NetworkNamespace) -> None:
    here = socket.socket()
    here.bind(("127.0.0.1", 0))
    here_port = here.getsockname()[1]
    _echo(here, b"here")
    api_port, reserved_port = _free_port(), _free_port()
    inside = namespace.socket_in()
    inside.bind(("127.0.0.1", api_port))
    _echo(inside, b"inside")
    # before the relay, neither side reaches the other
    assert _ask(namespace.socket_in(), here_port) == b""
    assert _ask(socket.socket(), api_port) == b""
    reserved_here = socket.socket()
    reserved_here.bind(("127.0.0.1", reserved_port))
    _echo(reserved_here, b"reserved")
    relay = subprocess.Popen([sys.executable, "-m", "dr_stream.dev.kube_relay", namespace.name,
                              "--outward", str(api_port), "--reserved", str(reserved_port)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert wait_until(lambda: _ask(namespace.socket_in(), here_port) == b"here?", 10)
        assert _ask(socket.socket(), api_port) == b"inside?"
        # a port the namespace keeps for its own processes is never taken for one of this machine
        time.sleep(1)
        assert _ask(namespace.socket_in(), reserved_port) == b""
        # a port that stops listening here stops being listened on there
        here.close()
        assert wait_until(lambda: not namespace.connects("127.0.0.1", here_port), 10)
    finally:
        relay.terminate()
        said, _ = relay.communicate(timeout=10)
        for sock in (inside, reserved_here):
            sock.close()
    assert f"relay: 127.0.0.1:{here_port} of this machine is reachable inside {namespace.name}" in said
    assert f"relay: 127.0.0.1:{here_port} stopped listening here; no longer carried" in said
    assert f":{reserved_port} " not in said
