"""The translation rule after the index runs: returned records, waiting, the timestamp fallback, clamping."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dr_stream.positions.translation_rule import (
    Translation,
    clamp,
    evolve,
    needs_timestamp,
    returned_look_ups,
    settle,
    through_returned,
)


class TestClamp:
    def test_inside_the_log_is_unchanged(self):
        assert clamp(5, 0, 10) == (5, "")

    def test_below_the_log_start_and_past_the_log_end_are_clamped_and_said(self):
        assert clamp(2, 5, 10) == (5, "clamped 2 -> 5 (destination log start)")
        assert clamp(300, 0, 0) == (0, "clamped 300 -> 0 (destination log end)")


def translation(source_offset, offset, method, timestamp=-1):
    return Translation(group="g", topic="t", partition=0, source_offset=source_offset, source_timestamp=timestamp,
                       dest_topic="t", dest_partition=0, offset=offset, method=method, note="", clamped=False,
                       log_start=None, log_end=None, last_copied=None, source_log_end=None, translated_at=0)


class TestReturnedRecords:
    """After a failover, the source holds copies of the destination's records: [0, 100) are
    copies of destination offsets 500..599, [100, 110) are the source's own records."""

    LOG = [(i, 500 + i) for i in range(100)] + [(i, None) for i in range(100, 110)]

    def through(self, offset, translated, method, log=LOG):
        def original_at(at_or_after):
            return next((original for at, original in log if at >= at_or_after), None)

        t = translation(offset, translated, method)
        found = through_returned(t, original_at)
        return found.offset, found.method

    def test_a_copy_at_the_committed_offset_maps_to_its_original(self):
        assert self.through(40, 1000, "next") == (540, "returned")

    def test_the_source_s_own_records_keep_the_index_translation(self):
        assert self.through(105, 7, "exact") == (7, "exact")

    def test_past_the_last_copy_with_nothing_indexed_resumes_after_the_last_original(self):
        assert self.through(100, None, "timestamp", log=self.LOG[:100]) == (600, "returned")
        assert self.through(100, 300, "next") == (600, "returned")

    def test_an_index_position_further_on_wins_over_the_last_original(self):
        assert self.through(110, 900, "next") == (900, "next")

    def test_the_look_ups_fetched_ahead_of_a_round_are_all_the_rule_asks_for(self):
        for method in ("exact", "waiting", "next", "timestamp"):
            for offset in (40, 100, 105):
                asked: list[int] = []

                def original_at(at_or_after, asked=asked):
                    asked.append(at_or_after)
                    return next((original for at, original in self.LOG if at >= at_or_after), None)

                t = translation(offset, 7, method)
                through_returned(t, original_at)
                assert set(asked) <= set(returned_look_ups(t)), (method, offset, asked)


class TestSettle:
    BOUNDS = (100, 200)

    def test_an_exact_offset_inside_the_log_is_kept_with_no_note(self):
        t = settle(translation(5, 150, "exact"), self.BOUNDS)
        assert (t.offset, t.method, t.clamped, t.note, t.log_start, t.log_end) == (150, "exact", False, "", 100, 200)

    def test_an_offset_outside_the_log_is_clamped_and_the_clamp_is_reported(self):
        t = settle(translation(5, 250, "next"), self.BOUNDS)
        assert (t.offset, t.clamped) == (200, True)
        assert "clamped 250 -> 200" in t.note

    def test_a_note_from_placing_the_offset_is_kept_beside_a_clamp(self):
        t = replace(translation(5, 50, "window"), note="fallback: inside a span")
        settled = settle(t, self.BOUNDS)
        assert (settled.offset, settled.method, settled.note) == (
            100, "window", "fallback: inside a span; clamped 50 -> 100 (destination log start)")

    def test_a_missing_destination_partition_is_not_translated(self):
        t = settle(translation(5, 150, "exact"), None)
        assert (t.offset, t.method) == (None, "none")
        assert "does not exist" in t.note

    def test_the_timestamp_fallback_takes_the_offset_found_for_the_commit_s_timestamp(self):
        t = translation(5, None, "timestamp", timestamp=1234)
        assert needs_timestamp(t, self.BOUNDS)
        settled = settle(t, self.BOUNDS, by_timestamp=170)
        assert (settled.offset, settled.method) == (170, "timestamp")
        assert "by timestamp 1234" in settled.note

    def test_the_timestamp_fallback_with_every_record_older_resumes_at_the_log_end(self):
        assert settle(translation(5, None, "timestamp", timestamp=1234), self.BOUNDS).offset == 200

    def test_no_index_and_no_timestamp_is_not_translated(self):
        t = translation(5, None, "timestamp")
        assert not needs_timestamp(t, self.BOUNDS)
        settled = settle(t, self.BOUNDS)
        assert (settled.offset, settled.method) == (None, "none")

    def test_an_exact_translation_never_asks_for_a_timestamp(self):
        assert not needs_timestamp(translation(5, 150, "exact", timestamp=1234), self.BOUNDS)
        assert not needs_timestamp(translation(5, None, "timestamp", timestamp=1234), None)


class TestUnreplicated:
    def test_counts_the_source_records_after_the_last_copied_one(self):
        t = Translation(group="g", topic="t", partition=0, source_offset=5, source_timestamp=-1, dest_topic="t",
                        dest_partition=0, offset=5, method="exact", note="", clamped=False, log_start=0, log_end=10,
                        last_copied=49, source_log_end=60, translated_at=0)
        assert t.unreplicated == 10

    def test_everything_is_unreplicated_when_nothing_was_copied_and_nothing_when_the_end_is_unknown(self):
        nothing = Translation(group="g", topic="t", partition=0, source_offset=5, source_timestamp=-1, dest_topic="t",
                              dest_partition=0, offset=5, method="exact", note="", clamped=False, log_start=0,
                              log_end=10, last_copied=None, source_log_end=60, translated_at=0)
        unknown = Translation(group="g", topic="t", partition=0, source_offset=5, source_timestamp=-1, dest_topic="t",
                              dest_partition=0, offset=5, method="exact", note="", clamped=False, log_start=0,
                              log_end=10, last_copied=49, source_log_end=None, translated_at=0)
        assert (nothing.unreplicated, unknown.unreplicated) == (60, None)



class TestWaiting:
    def test_a_waiting_position_stays_untranslated_with_a_note_and_no_clamp(self):
        got = settle(translation(500, None, "waiting"), (0, 100))
        assert (got.offset, got.method, got.clamped) == (None, "waiting", False)
        assert "still being copied" in got.note

    def test_a_waiting_position_is_not_replaced_by_the_last_original_before_it(self):
        got = through_returned(translation(500, None, "waiting"), lambda o: None if o == 500 else 40)
        assert (got.offset, got.method) == (None, "waiting")


class TestEvolve:
    def test_it_is_what_dataclasses_replace_makes_and_leaves_the_original_alone(self):
        t = translation(10, 12, "exact")
        changed = evolve(t, offset=15, note="moved")
        assert changed == replace(t, offset=15, note="moved") and hash(changed) == hash(replace(t, offset=15,
                                                                                                 note="moved"))
        assert (t.offset, t.note) == (12, "")

    def test_a_field_it_does_not_have_is_refused(self):
        with pytest.raises(TypeError, match="no field ofset"):
            evolve(translation(1, 1, "exact"), ofset=2)
