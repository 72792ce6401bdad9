"""Offsets an application keeps itself (`translate --offsets`): the input's shape and what is
refused before anything is asked of a cluster, and the answer's shape (the rules, no cluster)."""

from __future__ import annotations

import pytest

from dr_stream.operations.application_offsets import (
    OffsetsError,
    TranslatedOffset,
    TranslatedOffsets,
    parse_offsets,
    refused,
)

WHERE = "offsets in ckpt.json"


def test_sparks_starting_offsets_shape_is_read_with_its_sentinels() -> None:
    text = '{"orders": {"0": 23, "1": -2}, "payments": {"0": -1}}'
    assert parse_offsets(text, WHERE) == {("orders", 0): 23, ("orders", 1): -2, ("payments", 0): -1}


@pytest.mark.parametrize(("text", "said"), [
    ('{"orders": {"0": 23,}}', "offsets in ckpt.json: not JSON (Expecting property name enclosed in double quotes "
                               "at line 1, column 21)"),
    ("[1, 2]", 'offsets in ckpt.json: expected {"topic": {"partition": offset}}, got [1, 2]'),
    ("{}", 'offsets in ckpt.json: expected {"topic": {"partition": offset}}, got {}'),
    ('{"orders": 23}', "offsets in ckpt.json: topic 'orders': expected {\"partition\": offset}, got 23"),
    ('{"orders": {"p0": 23}}', "offsets in ckpt.json: topic 'orders': partition 'p0' is not a partition number"),
    ('{"orders": {"0": -3}}', "offsets in ckpt.json: orders[0]: offset -3 is not an offset"),
    ('{"orders": {"0": 2.5}}', "offsets in ckpt.json: orders[0]: offset 2.5 is not an offset"),
    ('{"orders": {"0": true}}', "offsets in ckpt.json: orders[0]: offset true is not an offset"),
])
def test_a_malformed_input_is_one_line_naming_where_and_what(text: str, said: str) -> None:
    with pytest.raises(OffsetsError) as raised:
        parse_offsets(text, WHERE)
    assert str(raised.value).startswith(said)
    assert "\n" not in str(raised.value)


def test_a_topic_the_flow_does_not_copy_is_refused_whether_or_not_the_source_answers() -> None:
    copied = {"orders"}.__contains__
    assert refused({("orders", 0): 5, ("audit", 0): 1}, copied, None, WHERE) == (
        "offsets in ckpt.json: topic 'audit' is not one this flow copies (its topics filter)")


def test_offsets_the_source_cannot_have_given_are_refused_when_it_answers() -> None:
    bounds = {("orders", 0): (100, 500)}
    assert refused({("orders", 0): 500}, lambda t: True, bounds, WHERE) is None  # the end: nothing left to read
    assert refused({("orders", 0): 501}, lambda t: True, bounds, WHERE) == (
        "offsets in ckpt.json: orders[0]: offset 501 is beyond the source's log end 500: "
        "these offsets are not from this flow's source")
    assert refused({("orders", 3): 1}, lambda t: True, bounds, WHERE) == (
        "offsets in ckpt.json: orders[3] does not exist on the source")
    assert refused({("orders", 3): -1}, lambda t: True, bounds, WHERE) is None  # a sentinel names no offset
    assert refused({("orders", 0): 10**9}, lambda t: True, None, WHERE) is None  # the source is gone


def test_the_answer_is_sparks_shape_under_the_destination_names_and_says_what_is_not_exact() -> None:
    answer = TranslatedOffsets([
        TranslatedOffset("orders", 1, 40, "dc1.orders", 140, "exact", ""),
        TranslatedOffset("orders", 0, 10, "dc1.orders", 7, "timestamp", "nothing indexed"),
        TranslatedOffset("orders", 2, 9, "dc1.orders", 0, "exact", "clamped to log start 0", clamped=True),
        TranslatedOffset("orders", 3, -2, "dc1.orders", -2, "earliest", "the same on the destination"),
    ], True, WHERE)
    assert answer.document() == {"dc1.orders": {"0": 7, "1": 140, "2": 0, "3": -2}}
    assert [(p.partition, p.exact) for p in answer.positions] == [(1, True), (0, False), (2, False), (3, True)]
    assert [p.line() for p in answer.inexact] == [
        "not exact: orders[0] at 10 -> dc1.orders[0] at 7 (timestamp: nothing indexed)",
        "not exact: orders[2] at 9 -> dc1.orders[2] at 0 (exact: clamped to log start 0)",
    ]
