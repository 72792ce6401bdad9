"""The one door between this machine's loopback and the dev Kubernetes' network namespace.

Into the namespace: every TCP port something on this machine listens on at 127.0.0.1 (or on
every address) is listened on at the namespace's own 127.0.0.1 too, and each connection there
is carried to the same port on this machine's 127.0.0.1. So a pod on the node's network reaches
the dev Kafka clusters and HDFS at the addresses they advertise (127.0.0.1 or localhost), as
it did when it shared the machine's network. Out of it: the API server's port on this
machine's 127.0.0.1, carried to the namespace's 127.0.0.1, so kubectl and spark-submit here need
no route to the node's address.

Invariant: the relay dials 127.0.0.1 only, each time in the namespace its listener is not in,
and nothing else crosses; ports the namespace's own processes hold (`reserved`) are never
taken from them. Started and stopped by `kube.LocalKube` like its other processes:
`python -m dr_stream.dev.kube_relay NAMESPACE --outward PORT --reserved PORT,...`.
"""

from __future__ import annotations

import argparse
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable

from dr_stream.dev.netns import NetworkNamespace

LOOPBACK = "127.0.0.1"
POLL_S = 0.5  # how soon a port that starts listening here is reachable in the namespace
_LISTEN = "0A"
# /proc/net/tcp's addresses a connection to 127.0.0.1 reaches: 127.0.0.1 and "any", in IPv4 and
# as IPv6 (any, and 127.0.0.1 mapped)
_REACHED_BY_LOOPBACK = {"0100007F", "00000000", "00000000000000000000000000000000",
                        "0000000000000000FFFF00000100007F"}


def loopback_listeners(tables: Iterable[str]) -> set[int]:
    """The TCP ports a connection to 127.0.0.1 finds listening, from /proc/net/tcp and tcp6."""
    ports = set()
    for table in tables:
        for line in table.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 4 or fields[3] != _LISTEN:
                continue
            address, _, port = fields[1].partition(":")
            if address.upper() in _REACHED_BY_LOOPBACK:
                ports.add(int(port, 16))
    return ports


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _carry(accepted: socket.socket, dial: Callable[[], socket.socket], port: int) -> None:
    """Joins a connection accepted on one side to `port` on the other side's 127.0.0.1."""
    try:
        outbound = dial()
        outbound.settimeout(10)
        outbound.connect((LOOPBACK, port))
        outbound.settimeout(None)
    except OSError:
        accepted.close()
        return
    back = threading.Thread(target=_pump, args=(outbound, accepted), daemon=True)
    back.start()
    _pump(accepted, outbound)
    back.join()
    accepted.close()
    outbound.close()


class Relay:
    """Listeners on both sides; `step` accepts what arrived and follows this machine's ports."""

    def __init__(self, namespace: NetworkNamespace, outward: set[int], reserved: set[int],
                 say: Callable[[str], None] = print) -> None:
        self.namespace, self.outward, self.reserved, self.say = namespace, outward, reserved, say
        self.selector = selectors.DefaultSelector()
        self.inward: dict[int, socket.socket] = {}
        self.refused: set[int] = set()
        for port in sorted(outward):
            self._listen(socket.socket(), port, self.namespace.socket_in)

    def _listen(self, listener: socket.socket, port: int, dial: Callable[[], socket.socket]) -> None:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LOOPBACK, port))
        listener.listen(64)
        listener.setblocking(False)
        self.selector.register(listener, selectors.EVENT_READ, (port, dial))

    def follow(self, listening: set[int]) -> None:
        """The namespace listens on exactly this machine's loopback ports but its own and ours."""
        wanted = listening - self.reserved - self.outward
        for port in sorted(wanted - self.inward.keys() - self.refused):
            listener = self.namespace.socket_in()
            try:
                self._listen(listener, port, socket.socket)
            except OSError as error:  # something in the namespace holds it: theirs
                listener.close()
                self.refused.add(port)
                self.say(f"relay: 127.0.0.1:{port} is taken inside {self.namespace.name}, not carried ({error})")
                continue
            self.inward[port] = listener
            self.say(f"relay: 127.0.0.1:{port} of this machine is reachable inside {self.namespace.name}")
        for port in sorted(self.inward.keys() - wanted):
            self.say(f"relay: 127.0.0.1:{port} stopped listening here; no longer carried")
            listener = self.inward.pop(port)
            self.selector.unregister(listener)
            listener.close()
        self.refused &= wanted

    def step(self, timeout: float) -> None:
        for key, _ in self.selector.select(timeout):
            listener: socket.socket = key.fileobj  # type: ignore[assignment]
            port, dial = key.data
            try:
                accepted, _ = listener.accept()
            except BlockingIOError:
                continue
            accepted.setblocking(True)
            threading.Thread(target=_carry, args=(accepted, dial, port), daemon=True).start()


def _this_machines_listeners() -> set[int]:
    # the process's own tables: its main thread never enters the namespace
    tables = []
    for name in ("tcp", "tcp6"):
        try:
            with open(f"/proc/self/net/{name}") as table:
                tables.append(table.read())
        except OSError:
            continue
    return loopback_listeners(tables)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dr_stream.dev.kube_relay")
    parser.add_argument("namespace")
    parser.add_argument("--outward", type=int, action="append", default=[])
    parser.add_argument("--reserved", default="")
    args = parser.parse_args(argv)
    reserved = {int(p) for p in args.reserved.split(",") if p}
    relay = Relay(NetworkNamespace(args.namespace), set(args.outward), reserved,
                  say=lambda line: print(line, flush=True))
    print(f"relay: 127.0.0.1:{','.join(map(str, sorted(relay.outward)))} here carried into {args.namespace}",
          flush=True)
    followed = 0.0
    while True:
        if time.monotonic() - followed >= POLL_S:
            relay.follow(_this_machines_listeners())
            followed = time.monotonic()
        relay.step(POLL_S)


if __name__ == "__main__":
    sys.exit(main())
