"""A streaming query's start, on a thread of its own, so the one who asked need not wait for it.

Spark's `DataStreamWriter.start()` returns once the query's own thread has handed its start to
every listener of the session, which it does one by one on that thread: a listener that does not
return, a checkpoint store that does not answer, or an earlier run of the same query that does not
stop holds `start()` there, while the query itself may already be registered and running. A
supervisor waiting inside `start()` would restart nothing again. So the start runs here, the
supervisor waits for it a bounded time, and past that asks Spark which queries run
(`active_query`) instead of the call that has not returned.

Invariants: `done` is true once the start returned or raised; `result` gives its query or raises
its exception, and is only asked once `done`; the thread is a daemon, so a start that never
returns never keeps the process alive. A start `cancel`led before it returned stops its query
as soon as it does: a flow that stopped meanwhile would otherwise leave that query running in
the session, and its name taken from every later flow of the same name.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.util import InheritableThread


class QueryStart:
    def __init__(self, name: str, start: Callable[[], StreamingQuery]) -> None:
        self._start = start
        self._query: StreamingQuery | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._cancelled = False
        self._lock = threading.Lock()
        # Spark's local properties (the scheduler pool among them) follow the start onto its thread.
        self._thread = InheritableThread(target=self._run, name=f"start {name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            query = self._start()
            with self._lock:
                self._query, cancelled = query, self._cancelled
            if cancelled:
                query.stop()
        except BaseException as exc:  # handed to whoever asks for the result
            self._error = exc
        finally:
            self._done.set()

    def cancel(self) -> StreamingQuery | None:
        """No one will supervise what this start brings: its query, if the start returned
        already (the caller stops it), else None, and the start stops its query when it returns."""
        with self._lock:
            self._cancelled = True
            return self._query

    def wait(self, timeout_s: float) -> bool:
        """Whether the start has returned (or raised), waiting up to `timeout_s` for it."""
        return self._done.wait(timeout_s)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def result(self) -> StreamingQuery:
        """The started query; raises what the start raised."""
        if self._error is not None:
            raise self._error
        assert self._query is not None, "result() asked before the start returned"
        return self._query

    def where(self, depth: int = 8) -> str:
        """Where the start's thread is now, innermost frame first ('unknown' once the thread has
        ended, which in pinned-thread mode is a moment after the start returned: py4j closes the
        thread's connection as it goes)."""
        frame = sys._current_frames().get(self._thread.ident or -1)
        if frame is None:
            return "unknown"
        frames = reversed(traceback.extract_stack(frame, limit=depth))
        return " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}" for f in frames)


def active_query(spark: SparkSession, name: str) -> StreamingQuery | None:
    """The query of that name Spark runs now, if any: Spark registers a query as active before
    its start returns, and names are unique among a session's active queries."""
    return next((q for q in spark.streams.active if q.name == name), None)
