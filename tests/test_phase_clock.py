"""Where a start-up's time went: each phase is the time since the mark before it."""

from __future__ import annotations

from dr_stream.phase_clock import PhaseClock


def clock_at(*times: float) -> PhaseClock:
    ticks = iter(times)
    return PhaseClock(now=lambda: next(ticks))


def test_each_phase_is_the_time_since_the_previous_mark_and_they_add_up_to_the_total():
    clock = clock_at(100.0, 104.0, 104.5, 110.0)
    for phase in ("spark session", "clusters", "destination scan"):
        clock.mark(phase)
    assert clock.phases == [("spark session", 4.0), ("clusters", 0.5), ("destination scan", 5.5)]
    assert clock.total_s == 10.0


def test_the_line_shows_the_total_then_each_phase_in_order():
    clock = clock_at(0.0, 6.04, 6.3)
    clock.mark("spark session")
    clock.mark("topics")
    assert clock.shown() == "6.3 s (spark session 6.0 s, topics 0.3 s)"


def test_a_clock_with_no_mark_shows_zero():
    assert clock_at(5.0).shown() == "0.0 s ()"
