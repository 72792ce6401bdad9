"""When the lag sampler gives up on its producer: the rule alone."""

from dr_stream.replication.lag_sampler import StuckQueue


def test_a_queue_that_never_empties_while_the_destination_answers_is_stuck_after_the_limit():
    queue = StuckQueue(limit_s=20)
    assert [queue.stuck(1, True, t) for t in (0, 10, 19.9)] == [False, False, False]
    assert queue.stuck(2, True, 20)
    assert not queue.stuck(2, True, 21)  # the clock starts again for the new producer


def test_a_queue_that_empties_between_rounds_is_never_stuck():
    queue = StuckQueue(limit_s=20)
    assert not any(queue.stuck(n, True, t) for t, n in zip(range(0, 100, 5), [1, 0] * 10, strict=True))


def test_the_time_the_destination_is_away_does_not_count():
    queue = StuckQueue(limit_s=20)
    assert not queue.stuck(3, True, 0)
    assert not queue.stuck(5, False, 15)  # away: the samples wait, as they should
    assert not queue.stuck(5, True, 30)  # back: the reconnect gets its own 20 s
    assert not queue.stuck(5, True, 49)
    assert queue.stuck(5, True, 50)
