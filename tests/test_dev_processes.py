"""What the dev tools ask of this machine: whether a loopback port answers."""

from __future__ import annotations

import socket

from dr_stream.dev.processes import loopback_listening


def test_a_loopback_port_listens_while_a_socket_accepts_on_it_and_not_after_it_closes():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        assert loopback_listening(port)
    assert not loopback_listening(port, timeout_s=0.2)
