from dr_stream.loop_pace import LoopPace


def test_a_quick_round_waits_the_interval():
    pace = LoopPace(0.5)
    assert pace.done(0.1) == 0.5
    assert round(pace.period_s, 3) == 0.6


def test_a_slow_round_waits_as_long_as_it_took_so_rounds_never_crowd_the_cluster():
    pace = LoopPace(0.5)
    assert pace.done(2.0) == 2.0
    assert pace.period_s == 4.0


def test_the_wait_follows_the_last_round_back_down():
    pace = LoopPace(1.0)
    pace.done(3.0)
    assert pace.done(0.2) == 1.0
    assert round(pace.period_s, 3) == 1.2


def test_a_negative_duration_from_a_clock_step_counts_as_none():
    assert LoopPace(1.0).done(-5.0) == 1.0
