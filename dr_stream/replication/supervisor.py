"""Keeps a flow's queries and driver threads running until it is told to stop.

Invariants: a query that fails is restarted from its own checkpoint, with a backoff that
doubles up to a limit and resets after a minute of health, as long as Spark itself runs: once
the SparkContext is stopped under the flow (its JVM got the scheduler's SIGTERM, or died) the
flow ends with one line instead of restarting into it; a driver thread whose loop ends on
an error is said in one line, counted (`dr_stream_thread_failures_total`) and started again; a
stop waits for each query to finish its batch in flight (within a grace period), since an
interrupted batch is replayed and an interrupted translation-log write loses the newest
positions. The supervisor never depends on a query's start returning: past `START_WAIT_S` it
supervises the query Spark runs under that name, and says so.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming import StreamingQuery

from dr_stream.background import Background
from dr_stream.core.config import ConfigError
from dr_stream.failure_notes import first_line, summarised
from dr_stream.kafka.waits import WAITS
from dr_stream.log_format import writes_json
from dr_stream.replication.flow import ReplicationFlow, Worker
from dr_stream.replication.metrics_server import MetricsServer
from dr_stream.replication.progress import listen, unlisten
from dr_stream.replication.query_start import QueryStart, active_query
from dr_stream.runtime.jvm_classes import jvm_class

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


# How long a stop waits for a running micro-batch, which would otherwise be replayed.
STOP_GRACE_S = 30.0
# How often a flow says what its clients waited for while a cluster settled (`kafka.waits`).
WAITS_EVERY_S = 60.0


class SparkStopped(RuntimeError):
    """The flow's SparkContext stopped while the flow ran: nothing can be restarted in it."""


def spark_running(spark: SparkSession) -> bool:
    """Whether the flow's SparkContext still runs. Under `spark-submit` the Python driver is a
    child of the JVM, which stops Spark when it is signalled and does not signal the driver: the
    driver learns of it only here, or as a query that failed, and must not take that failure for
    one it can restart (it would retry forever against a stopped or vanished JVM)."""
    try:
        return not spark.sparkContext._jsc.sc().isStopped()
    except Exception:  # the JVM is gone: its gateway refuses the call
        return False


def name_taken(error: BaseException) -> bool:
    """Whether a query's start failed because the session runs another query of that name."""
    return "with that name is already active" in str(error)


def _error_line(error: BaseException | None) -> str:
    """The first line of a query's error: what failed, without the JVM's stack."""
    return first_line(error) if error and str(error).strip() else "query stopped"


def _error_text(error: BaseException | None) -> str:
    """A query's error with the JVM's text of it (where a refused record's origin is told)."""
    return "" if error is None else f"{error}\n{getattr(error, '_stackTrace', '') or ''}"


def kept_running(name: str, run: Callable[[threading.Event], None], stop: threading.Event,
                 log: Callable[[str], None], failed: Callable[[str], None] = lambda name: None,
                 pause_s: float = 5.0) -> None:
    """A driver thread's loop, started again when it ends on an error, until `stop` is set.

    Each loop handles what a cluster or storage can throw, so an error reaching here is a fault
    of dr-stream's own; the thread must not die with it, or the lag, the health and the
    positions it keeps would freeze while the flow looks alive. `failed` counts it."""
    said = summarised(log)
    while not stop.is_set():
        try:
            run(stop)
            return
        except Exception as exc:
            if stop.is_set():  # failed as the flow stopped (its JVM may be gone): not a fault
                return
            failed(name)
            said(f"driver thread {name} stopped on {type(exc).__name__}: {first_line(exc)}; "
                 f"started again in {pause_s:g} s")
            stop.wait(pause_s)


# A (re)start reads the index and the destination (up to `streaming.resume_scan_timeout`, 60 s by
# default) and starts the query: past this, the supervisor stops waiting for the start to return and
# asks Spark whether the query runs (`query_start`).
START_WAIT_S = 120.0


@dataclass
class _Supervised:
    name: str
    start: Callable[[], StreamingQuery]
    query: StreamingQuery | None = None
    started_at: float = 0.0
    backoff: float = 1.0
    restart_at: float | None = 0.0
    launches: int = 0
    # a start that has not returned and whose query Spark did not run yet when last asked
    starting: QueryStart | None = None

    def supervise(self, query: StreamingQuery) -> None:
        self.query, self.started_at, self.restart_at, self.starting = query, time.monotonic(), None, None


@dataclass
class _Supervisor:
    """Keeps each query of a flow running; a failed one restarts from its checkpoint with backoff."""

    flow: ReplicationFlow
    max_backoff_s: float
    parts: list[_Supervised] = field(default_factory=list)
    running: Callable[[], bool] = lambda: True
    start_wait_s: float = START_WAIT_S
    # (query, error text) -> whether the error was a record the destination refused, its partition now held
    held: Callable[[str, str], bool] = lambda name, error: False

    def check(self) -> None:
        """Restarts what failed; raises SparkStopped once Spark no longer runs."""
        if not self.running():
            raise SparkStopped("Spark stopped under the flow (its JVM was told to stop, or died): "
                               "the flow stops too instead of restarting its queries")
        now = time.monotonic()
        for part in self.parts:
            if part.starting is not None:
                self._started(part, part.starting, now)
                continue
            if part.restart_at is not None:
                if now >= part.restart_at:
                    self._launch(part, now)
                continue
            query = part.query
            if query is None:  # not reached: a part neither starting nor due to start has its query
                continue
            active = query.isActive
            self.flow.metrics.query_active(part.name, active)
            if active:
                # only the replicate query restarts on request (a new topic, a wider trigger)
                reason = self.flow.take_restart_request() if part.name == self.flow.config.replicate_query else None
                if reason:
                    began = time.monotonic()
                    self._stop_between_batches(query)
                    self.flow.log(f"{part.name}: stopped between batches in {time.monotonic() - began:.1f}s for "
                                  "its restart")
                    self._launch(part, now)
                continue
            error = query.exception()
            if self.held(part.name, _error_text(error)):
                # a refused record: its partition is held, and the others go on at once
                self.flow.metrics.query_active(part.name, False)
                part.restart_at = now
                continue
            self._retry(part, now, f"{part.name} failed: {_error_line(error)}")

    def _launch(self, part: _Supervised, now: float) -> None:
        """Starts a query and waits for its start up to `start_wait_s`."""
        start = QueryStart(part.name, part.start)
        start.wait(self.start_wait_s)
        self._started(part, start, now)

    def _started(self, part: _Supervised, start: QueryStart, now: float) -> None:
        """Takes the outcome of a start. A start that fails on a cluster (a topic created a moment
        ago may have no leader yet) is retried like a failed query; a refusal of the config is final.
        A start that has not returned is not waited for: the query Spark runs under its name is
        supervised from then on, and until Spark runs one the start is asked again each round."""
        query: StreamingQuery | None
        if start.done:
            try:
                query = start.result()
            except ConfigError:
                raise
            except Exception as exc:
                part.starting = None
                stale = active_query(self.flow.spark, part.name) if name_taken(exc) else None
                if stale is not None:
                    # Names are unique per flow: a query of this name that is not the one
                    # supervised is an earlier start's, which no one supervises any more.
                    self.flow.log(f"{part.name} could not start: an earlier run of it (run {stale.runId}) still "
                                  "runs in this Spark session, unsupervised; it is stopped between batches and "
                                  "the query started again")
                    self._stop_between_batches(stale)
                    part.restart_at = now
                    return
                self._retry(part, now, f"{part.name} could not start: {first_line(exc)}")
                return
        else:
            if part.starting is not start:  # counted once per start, whether or not Spark runs it yet
                self.flow.metrics.start_unreturned(part.name)
            query = active_query(self.flow.spark, part.name)
            if query is None:
                self.flow.metrics.query_active(part.name, False)
                if part.starting is None:
                    self.flow.log(f"{part.name}: its start has not returned after {self.start_wait_s:g} s and "
                                  f"Spark runs no query of that name yet; the start waits at {start.where()}")
                part.starting = start
                return
            self.flow.log(f"{part.name}: its start has not returned after {self.start_wait_s:g} s, but Spark runs "
                          f"the query (run {query.runId}): supervised from Spark's own state; the start waits at "
                          f"{start.where()}")
        part.supervise(query)
        part.launches += 1
        self.flow.metrics.query_started(part.name, restart=part.launches > 1)

    def _retry(self, part: _Supervised, now: float, what: str) -> None:
        self.flow.metrics.query_active(part.name, False)
        if now - part.started_at > 60:
            part.backoff = 1.0
        self.flow.log(f"{what}; restarting from its checkpoint in {part.backoff:.0f}s")
        part.restart_at = now + part.backoff
        part.backoff = min(part.backoff * 2, self.max_backoff_s)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stops each query between batches when it can: an interrupted batch would have to be
        replayed, and an interrupted translation-log write would lose the newest positions. A
        query whose start has not returned is found by its name among those Spark runs.

        A query no longer active is stopped too: a SIGTERM to the process group reaches the JVM,
        whose hook may have marked the query terminated while its last batch still runs
        (`StopBetweenBatches`); the stop here then waits for that one to end, where skipping it
        let the flow stop Spark under the batch (its write aborted, the hook's wait failed)."""
        for part in self.parts:
            try:
                self._stop_part(part, grace_s)
            except Exception as exc:  # the others are stopped all the same
                self.flow.log(f"{part.name}: its stop between batches failed ({first_line(exc)}); it is stopped "
                              "where it is")
            left = active_query(self.flow.spark, part.name)
            if left is not None:  # a stop that failed leaves the query running, its name taken
                left.stop()

    def _stop_part(self, part: _Supervised, grace_s: float) -> None:
        query = part.query
        if part.starting is not None:
            # a start that has not returned stops its query when it does; Spark may run it already
            query = part.starting.cancel() or active_query(self.flow.spark, part.name)
        if query is not None:
            self._stop_between_batches(query, grace_s)

    def _stop_between_batches(self, query: StreamingQuery, grace_s: float = STOP_GRACE_S) -> None:
        _stop_class(self.flow.spark).stop(query._jsq, _grace_ms(self.flow, grace_s), *_line_style(self.flow))


def stop_between_batches_at_exit(flow: ReplicationFlow) -> None:
    """A SIGTERM that reaches the JVM itself (a scheduler's to `spark-submit`, a container
    manager's, or one sent to the whole process group) waits for the running batch as well:
    otherwise Spark's own shutdown hook stops the SparkContext under it and its refused tasks
    print their stack traces (`io.drstream.spark.StopBetweenBatches`)."""
    _stop_class(flow.spark).install(flow.spark._jsparkSession.streams(), _grace_ms(flow), *_line_style(flow))
    # A refused record is said by the flow in one line (`holds`): Spark's three stack traces of it are not.
    jvm_class(flow.spark.sparkContext, "io.drstream.spark.RefusalLogFilter").install()


def _grace_ms(flow: ReplicationFlow, grace_s: float = STOP_GRACE_S) -> int:
    # A real-time batch never ends: it is stopped where it is, and the next start's resume filter
    # drops what it had already written.
    return 0 if flow.config.streaming.realtime else int(grace_s * 1000)


def _line_style(flow: ReplicationFlow) -> tuple[str, bool]:
    """The JVM's one line about a stop is the flow's: its name, and whether lines are JSON now."""
    return flow.config.name, writes_json()


def _stop_class(spark: SparkSession) -> Any:
    return jvm_class(spark.sparkContext, "io.drstream.spark.StopBetweenBatches")


def jvm_stopping(spark: SparkSession) -> bool:
    """Whether the driver's JVM is shutting down (a signal reached it, not this process): the
    flow then stops as on its own signal, while Spark still runs (`StopBetweenBatches`)."""
    try:
        return bool(_stop_class(spark).stopping())
    except Exception:  # the JVM is gone: `spark_running` says so
        return False


def release_jvm(spark: SparkSession) -> None:
    """The flow's stop is done: a JVM shutting down may stop Spark now."""
    try:
        _stop_class(spark).released()
    except Exception:  # gone already
        pass


def _join(workers: list[threading.Thread], within_s: float) -> None:
    """One deadline for all: each loop sees its stop within its own wait, and they are daemons."""
    joined_by = time.monotonic() + within_s
    for worker in workers:
        if worker.ident is not None:  # started
            worker.join(timeout=max(0.0, joined_by - time.monotonic()))


def _driver_threads(flow: ReplicationFlow, also: Sequence[Worker], stop: threading.Event) -> list[threading.Thread]:
    """The flow's driver threads and `also`, each kept running until `stop` (not started yet)."""
    return [threading.Thread(target=kept_running, args=(name, run, stop, flow.log, flow.metrics.thread_failed),
                             name=f"{name}-{flow.config.name}", daemon=True)
            for name, run in [*flow.workers(), *also]]


def every(period_s: float, act: Callable[[], object]) -> Callable[[], None]:
    """A call that runs `act` when `period_s` has passed since it last did (or since it was made)."""
    last = [time.monotonic()]

    def maybe() -> None:
        if time.monotonic() - last[0] >= period_s:
            last[0] = time.monotonic()
            act()

    return maybe


def _serve_metrics(flow: ReplicationFlow, port: int | None) -> MetricsServer | None:
    settings = flow.config.metrics
    port = settings.port if port is None else port
    if port is None:
        return None
    server = MetricsServer(flow.metrics, settings.host, port, settings.health_window_s).start()
    flow.log(f"metrics on http://{settings.host}:{server.port}/metrics, health on /healthz")
    return server


def run_until_stopped(flow: ReplicationFlow, stop: threading.Event | None = None, max_backoff_s: float = 30.0,
                      metrics_port: int | None = None, also: Sequence[Worker] = (),
                      start_wait_s: float = START_WAIT_S) -> None:
    """Runs the flow's query and threads until SIGINT/SIGTERM (or `stop`), restarting failed queries.
    Serves /metrics and /healthz on `metrics_port` (else `metrics.port` of the config; 0: any free port).
    `also`: threads that watch the flow from outside it (the periodic drill), run beside its own.
    `start_wait_s`: how long a query's start is waited for before Spark is asked whether it runs."""
    stop = stop or threading.Event()
    flow.connect()
    server = _serve_metrics(flow, metrics_port)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    stop_between_batches_at_exit(flow)
    listener = listen(flow.spark, flow.progress, flow.translate_progress)
    supervisor = _Supervisor(flow, max_backoff_s, [_Supervised(name, start) for name, start in flow.queries()],
                             running=lambda: spark_running(flow.spark), start_wait_s=start_wait_s,
                             held=lambda name, error: name == flow.config.replicate_query
                             and flow.holds.hold(error) is not None)
    workers = _driver_threads(flow, also, stop)
    try:
        supervisor.check()
        # The driver threads start once the query runs: their first rounds (a poll of every
        # group, the lag of every partition) would otherwise compete with the restart itself.
        for worker in workers:
            worker.start()
        flow.log(f"replicating {flow.config.source.alias} ({flow.source_cluster_id}) -> "
                 f"{flow.config.destination.alias} ({flow.destination_cluster_id}); queries "
                 f"{', '.join(p.name for p in supervisor.parts)}; "
                 f"checkpoints under {flow.config.streaming.checkpoint_dir}")
        say_waits = every(WAITS_EVERY_S, lambda: [flow.log(line) for line in WAITS.lines()])
        while not stop.is_set():
            stop.wait(1)
            say_waits()  # what the flow's clients waited for while a cluster settled, once a minute
            if jvm_stopping(flow.spark):
                flow.log("the Spark JVM was told to stop: the flow stops")
                break
            if not stop.is_set():
                supervisor.check()
    except SparkStopped as exc:
        flow.log(str(exc))
        raise
    finally:
        stop.set()
        try:
            supervisor.stop()
            unlisten(flow.spark, listener)
        except Exception:  # the JVM may already be gone when the whole process group got the signal
            pass
        _join(workers, 15.0)
        if server is not None:
            server.close()
        flow.close()
        release_jvm(flow.spark)
        for line in WAITS.lines():
            flow.log(line)
        flow.log("stopped")
        sys.stdout.flush()


@contextmanager
def running_in_background(flow: ReplicationFlow, join_s: float = 60.0) -> Iterator[Background]:
    """Runs `flow` as `run_until_stopped` does, on a thread of its own, until the block ends: how
    a command runs a flow among its steps (failback's copy back) and how the tests run one.
    `Background.check` raises there when the run has failed."""
    flow.connect()
    stop = threading.Event()
    runner = Background(f"flow {flow.config.name}", lambda: run_until_stopped(flow, stop)).start()
    try:
        yield runner
    finally:
        stop.set()
        runner.join(timeout=join_s)
