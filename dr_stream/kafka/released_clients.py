"""Admin clients are destroyed on a thread of dr-stream's, never on one of librdkafka's.

librdkafka answers an admin request on the client's own background thread, which takes the GIL
to complete the request's future; destroying the client on that thread is a bug librdkafka
answers by aborting the whole process ("rd_kafka_destroy() called from librdkafka owned
thread"), a flow or a command gone in one line, with no Python frame to say why.

In Python a client is destroyed wherever its last reference goes, and two ways lead there:
  - a request in flight keeps its client (a retried request reissues on the same client), so
    when the caller has let the client go, the last reference is the answer's, dropped on that
    background thread once the future's callbacks have run;
  - the cycle collector runs on whichever thread allocates past its threshold, background
    threads included, and frees a client that only a garbage cycle still held.

So a client that reaches its end (`__del__`) is handed to one daemon thread, which holds it
until it holds the last reference (a request in flight may still hold one: Python runs
`__del__` only once, so that request's answer must not be the one to let it go), then drops it.

Invariant: a client built through `kafka.clients` is destroyed on the releasing thread, or
where its owner closed it (`__exit__`, which destroys at once and leaves nothing to release),
or at interpreter exit.
"""

from __future__ import annotations

import queue
import sys
import threading
from typing import Any

_THREAD_NAME = "kafka-client-release"
# How often a client a request still holds is looked at again.
_RECHECK_S = 0.2


class _Releases:
    """The clients waiting to be destroyed, and the one thread that destroys them."""

    def __init__(self) -> None:
        self._waiting: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # Reentrant: building the thread allocates, which may run the collector, which may hand
        # over another client on this same thread.
        self._lock = threading.RLock()
        self._started = False
        self.released = 0

    def hand_over(self, client: Any) -> None:
        self._waiting.put(client)
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._release, name=_THREAD_NAME, daemon=True).start()

    def _release(self) -> None:
        held: list[Any] = []
        while True:
            try:
                held.append(self._waiting.get(timeout=_RECHECK_S if held else None))
            except queue.Empty:
                pass
            kept: list[Any] = []
            while held:
                client = held.pop()
                # Two references are this loop's (`client`, getrefcount's argument); any more is
                # a request still in flight, whose answer would drop the last one on librdkafka's
                # thread, where `__del__` does not run a second time: it waits for the next look.
                last = sys.getrefcount(client) <= 2
                if not last:
                    kept.append(client)
                del client  # the last reference of a client not kept: librdkafka's destroy runs here
                if last:
                    self.released += 1
            held = kept


RELEASES = _Releases()


class ReleasedOnOwnThread:
    """Mixed into a confluent-kafka client class, ahead of it: its end is handed to `RELEASES`."""

    def __del__(self) -> None:
        if sys.is_finalizing():
            return  # the releasing thread is gone; nothing answers on librdkafka's threads any more
        RELEASES.hand_over(self)
