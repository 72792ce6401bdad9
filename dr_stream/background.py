"""A thread whose failure reaches whoever waits on it.

Python prints an exception raised in a thread and drops it: a caller waiting for what the
thread should produce waits out its timeout and then reports the symptom (nothing arrived),
not the cause. `Background` keeps the exception; `check` raises it in the caller's thread (to
be called while waiting) and `join` raises it too, or says the thread outlived its timeout.

Invariant: a thread that failed is never taken for one that finished: every `check` and `join`
after its failure raises `BackgroundFailed` naming the thread and the exception's first line.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from dr_stream.failure_notes import first_line


class BackgroundFailed(RuntimeError):
    pass


class Background:
    def __init__(self, name: str, target: Callable[[], object]) -> None:
        self.name = name
        self._target = target
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        try:
            self._target()
        except BaseException as exc:  # kept for the caller: check() and join() raise it there
            self.error = exc

    def start(self) -> Background:
        self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def check(self) -> None:
        """Raises the thread's failure, if it failed."""
        if self.error is not None:
            raise BackgroundFailed(f"{self.name} failed: {type(self.error).__name__}: "
                                   f"{first_line(self.error)}") from self.error

    def join(self, timeout: float) -> None:
        """Waits for the thread; raises its failure, or says it is still running after `timeout`."""
        self._thread.join(timeout)
        self.check()
        if self._thread.is_alive():
            raise BackgroundFailed(f"{self.name} still running after {timeout:g} s")
