"""JSON laid out for people, written at the speed of the standard library's C encoder.

``json.dump(..., indent=2)`` indents in pure Python, one call per value: for a batch report, whose
cases carry matrices, that was several milliseconds per submission, more than grading a correct
one. Here mappings and lists of structures are indented one item a line, and every list of plain
values (a matrix row, a shape, a list of names) is one line written by the C encoder. The text
differs only in whitespace: it parses to the same value.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable


def readable_json(value: Any, *, indent: int = 2, allow_nan: bool = True) -> str:
    parts: list[str] = []
    _lay_out(value, 0, indent, allow_nan, parts)
    return "".join(parts)


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


# The json module's own C function for strings (ASCII output, as json.dumps writes by default).
_STRING: Callable[[str], str] = json.encoder.encode_basestring_ascii


def _scalar(value: Any, allow_nan: bool) -> str:
    """A plain value as json.dumps writes it, without its per-call set-up."""
    if isinstance(value, str):
        return _STRING(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float) and math.isfinite(value):
        return float.__repr__(value)
    return json.dumps(value, allow_nan=allow_nan)  # NaN and infinities: written or refused there


def _key(key: Any) -> str:
    # As the json module does: a key that is not a string is written as its JSON text, quoted.
    return _STRING(key if isinstance(key, str) else json.dumps(key))


def _lay_out(value: Any, level: int, indent: int, allow_nan: bool, parts: list[str]) -> None:
    if isinstance(value, dict) and value:
        items: list[tuple[str, Any]] = [(_key(k) + ": ", v) for k, v in value.items()]
        opening, closing = "{", "}"
    elif isinstance(value, (list, tuple)) and value and not all(_plain(v) for v in value):
        items = [("", v) for v in value]
        opening, closing = "[", "]"
    elif _plain(value):
        parts.append(_scalar(value, allow_nan))
        return
    else:
        parts.append(json.dumps(value, allow_nan=allow_nan))  # a flat list, or an empty one
        return
    pad = " " * (indent * (level + 1))
    parts.append(opening)
    for position, (label, item) in enumerate(items):
        parts.append(("\n" if position == 0 else ",\n") + pad + label)
        _lay_out(item, level + 1, indent, allow_nan, parts)
    parts.append("\n" + " " * (indent * level) + closing)
