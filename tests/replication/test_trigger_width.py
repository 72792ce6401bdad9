from dr_stream.replication.trigger_width import BatchCost, TriggerWidth, seconds

TRICKLE = BatchCost(wall_ms=2100, records=900, partitions_read=300)  # 3 a partition, 2.1 s > 1 s


def rule(trigger_ms: int = 1000, ceiling_ms: int = 30_000) -> TriggerWidth:
    width = TriggerWidth(trigger_ms, ceiling_ms, batch_cap=200_000)
    assert width.batch_done(TRICKLE) is None  # the first batch of a start never counts
    return width


def trickle(width: TriggerWidth, batches: int) -> list:
    """What the rule returns for each of `batches` straining batches."""
    return [width.batch_done(TRICKLE) for _ in range(batches)]


def test_five_slow_batches_of_few_records_per_partition_widen_the_trigger_to_their_median_or_double():
    width = rule()
    assert trickle(width, 4) == [None] * 4
    widening = width.batch_done(TRICKLE)
    assert (widening.from_ms, widening.to_ms) == (1000, 3000)  # 2.1 s, rounded up to a second
    assert width.trigger_ms == 3000 and width.interval == "3000 milliseconds"
    line = widening.shown()
    assert line.startswith("trigger 1s -> 3s: ") and "median 2.1 s" in line and "3 records per partition" in line


def test_batches_that_still_strain_widen_it_again_at_least_doubling():
    width = rule()
    trickle(width, 5)
    width.restarted()
    trickle(width, 1)  # the restart's first batch
    slow = BatchCost(3500, 900, 300)  # longer than the 3 s trigger
    assert [width.batch_done(slow) for _ in range(4)] == [None] * 4
    assert width.batch_done(slow).to_ms == 6000  # 2 x 3 s beats the 3.5 s median


def test_a_batch_within_the_trigger_resets_the_count():
    width = rule()
    trickle(width, 4)
    assert width.batch_done(BatchCost(800, 900, 300)) is None
    assert trickle(width, 4) == [None] * 4


def test_batches_heavy_with_records_or_at_the_record_cap_never_widen_it():
    width = rule()
    for _ in range(10):
        assert width.batch_done(BatchCost(6000, 60_000, 300)) is None  # 200 a partition: records cost
        assert width.batch_done(BatchCost(6000, 200_000, 3000)) is None  # a backlog at the cap
    assert width.trigger_ms == 1000


def test_a_trigger_that_found_nothing_new_resets_the_count_batches_were_not_back_to_back():
    width = rule()
    trickle(width, 4)
    assert width.batch_done(BatchCost(0, 0, 0)) is None
    assert trickle(width, 4) == [None] * 4
    assert width.batch_done(TRICKLE).widened


def test_an_idle_trigger_right_after_a_start_leaves_the_start_s_first_batch_uncounted():
    width = TriggerWidth(1000, 30_000, batch_cap=200_000)
    width.batch_done(BatchCost(0, 0, 0))
    assert trickle(width, 5) == [None] * 5  # the first one was the start's


def test_it_at_least_doubles_and_stops_at_the_ceiling_once_said():
    width = rule(ceiling_ms=3000)
    quick_but_over = BatchCost(1200, 300, 300)
    for _ in range(4):
        width.batch_done(quick_but_over)
    assert width.batch_done(quick_but_over).to_ms == 2000  # double beats 1.2 s rounded up
    width.restarted()
    width.batch_done(TRICKLE)  # the restart's first batch
    slow = BatchCost(9000, 300, 300)
    for _ in range(4):
        width.batch_done(slow)
    assert width.batch_done(slow).to_ms == 3000  # 9 s, capped
    width.restarted()
    width.batch_done(slow)
    for _ in range(4):
        width.batch_done(slow)
    at_ceiling = width.batch_done(slow)
    assert not at_ceiling.widened and at_ceiling.to_ms == 3000
    assert at_ceiling.shown().startswith("trigger stays at 3s, its ceiling (streaming.max_trigger)")
    for _ in range(10):
        assert width.batch_done(slow) is None  # said once


def test_a_restart_forgets_the_straining_batches_before_it():
    width = rule()
    trickle(width, 4)
    width.restarted()
    assert trickle(width, 5) == [None] * 5  # the first after it is skipped


def test_durations_read_as_the_config_writes_them():
    assert [seconds(500), seconds(2000), seconds(1500)] == ["500ms", "2s", "1.5s"]
