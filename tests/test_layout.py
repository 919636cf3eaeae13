"""readable_json: the report files' layout. Same value as the json module's text, one line per
list of plain values, NaN refused where asked."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grader.report.layout import readable_json

plain = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
values = st.recursive(plain, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=40)


@given(values)
def test_parses_to_the_same_value_as_the_json_module(value: Any) -> None:
    assert json.loads(readable_json(value)) == json.loads(json.dumps(value))


def test_lays_out_structures_one_item_a_line_and_rows_on_one_line() -> None:
    text = readable_json({"matrix": [[1, 2], [3, 4]], "shape": [2, 2], "empty": {}, "none": []})
    assert text.splitlines() == [
        "{",
        '  "matrix": [',
        "    [1, 2],",
        "    [3, 4]",
        "  ],",
        '  "shape": [2, 2],',
        '  "empty": {},',
        '  "none": []',
        "}",
    ]


def test_keys_that_are_not_strings_are_written_as_the_json_module_writes_them() -> None:
    value = {1: "a", 2.5: "b", True: "c", None: "d"}
    assert json.loads(readable_json(value)) == json.loads(json.dumps(value))


def test_nan_is_refused_when_asked() -> None:
    assert readable_json([math.nan]) == "[NaN]"
    with pytest.raises(ValueError):
        readable_json({"x": [[math.inf]]}, allow_nan=False)
