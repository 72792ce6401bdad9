"""A network namespace of the dev tools' own: made and removed with `ip netns`, entered by the
processes that run there (`command`), and sockets made inside it by this process (`socket_in`).

A socket belongs for its whole life to the namespace it was made in, whichever thread uses it
later; so one process can listen in one namespace and dial in another, which is how
`kube_relay` joins the machine's loopback to the namespace's without either side having an
address the other could route.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

from dr_stream.dev.commands import run

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"setns: {os.strerror(error)}")


@dataclass(frozen=True)
class NetworkNamespace:
    """The namespace `name`, pinned at /run/netns/<name> while it exists."""

    name: str

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    def exists(self) -> bool:
        return self.path.exists()

    def create(self) -> None:
        """The namespace with its loopback up; nothing else in it until its users add it."""
        if not self.exists():
            run("ip", "netns", "add", self.name)
        run("ip", "-n", self.name, "link", "set", "lo", "up")

    def delete(self) -> None:
        """Unpins the namespace: its devices and addresses go with the last process in it."""
        if self.exists():
            run("ip", "netns", "delete", self.name, check=False)

    def ip(self, *args: str, check: bool = True) -> str:
        return run("ip", "-n", self.name, *args, check=check)

    def command(self, argv: list[str]) -> list[str]:
        """`argv` run inside the namespace and nowhere else: only the network is entered (the mount
        namespace stays this machine's, so what the kubelet mounts the container runtime sees)."""
        return ["nsenter", f"--net={self.path}", *argv]

    def socket_in(self, family: int = socket.AF_INET, kind: int = socket.SOCK_STREAM, proto: int = 0
                  ) -> socket.socket:
        """A socket made inside the namespace; the calling thread's own namespace is left as it
        was (the socket is made by a thread of its own, which enters the namespace and ends)."""
        made: list[socket.socket] = []
        failed: list[BaseException] = []

        def make() -> None:
            try:
                with self.path.open("rb") as pinned:
                    _setns(pinned.fileno())
                made.append(socket.socket(family, kind, proto))
            except BaseException as error:  # handed to the caller's thread
                failed.append(error)

        maker = threading.Thread(target=make, name=f"netns-{self.name}", daemon=True)
        maker.start()
        maker.join()
        if failed:
            raise failed[0]
        return made[0]

    def connects(self, host: str, port: int, timeout: float = 1.0) -> bool:
        """Whether something inside the namespace accepts a connection on host:port; False when
        the namespace is gone."""
        try:
            probe = self.socket_in()
        except OSError:
            return False
        with probe:
            probe.settimeout(timeout)
            return probe.connect_ex((host, port)) == 0
