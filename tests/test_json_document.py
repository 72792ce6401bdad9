"""`--json` documents: the same data as json.dumps, one object of a list per line."""

from __future__ import annotations

import json

from dr_stream.operations.report import json_document


def test_a_document_reads_back_as_the_data_it_was_given():
    document = {"source_reachable": False, "origin": 'say "gone"', "positions": [{"group": "g", "offset": None},
                                                                                 {"group": "h", "offset": 3}],
                "unreachable": ["dc1"], "held": [], "nested": {"a": [1, 2]}}
    assert json.loads(json_document(document)) == document


def test_each_object_of_a_list_is_a_line_of_its_own():
    text = json_document({"positions": [{"n": i} for i in range(3)]})
    assert text.splitlines() == ['{"positions": [', '  {"n": 0},', '  {"n": 1},', '  {"n": 2}', "]}"]
