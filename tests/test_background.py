"""A thread's failure reaches whoever waits on it (pure)."""

import threading

import pytest

from dr_stream.background import Background, BackgroundFailed


def test_a_failed_thread_raises_its_error_with_the_thread_name_in_the_waiter():
    def fail():
        raise ConnectionError("NOT_COORDINATOR\n  at ...")

    worker = Background("group-watch", fail).start()
    with pytest.raises(BackgroundFailed, match=r"^group-watch failed: ConnectionError: NOT_COORDINATOR$") as caught:
        worker.join(5)
    assert isinstance(caught.value.__cause__, ConnectionError)
    with pytest.raises(BackgroundFailed):
        worker.check()  # every later look says it again


def test_a_thread_that_finished_raises_nothing_and_one_still_running_is_named():
    Background("quick", lambda: None).start().join(5)
    release = threading.Event()
    slow = Background("slow", release.wait).start()
    slow.check()  # running is not failing
    with pytest.raises(BackgroundFailed, match=r"slow still running after 0\.1 s"):
        slow.join(0.1)
    release.set()
    slow.join(5)
