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


def readable_json(value: Any, *, indent: int = 2, allow_nan: bool = True, level: int = 0) -> str:
    """``value`` as JSON text; ``level``: how deep in a document the text will stand (its
    inner lines are indented for that place, its first line is not)."""
    parts: list[str] = []
    _lay_out(value, level, indent, allow_nan, parts)
    return "".join(parts)


class Prelaid:
    """A value laid out ahead of its document, for the place it will take there (``level``):
    a batch lays out each submission's part while the workers run, and the document at the end
    only joins the parts. Placed anywhere else, the value is laid out again."""

    __slots__ = ("value", "level", "indent", "allow_nan", "text")

    def __init__(self, value: Any, level: int, *, indent: int = 2, allow_nan: bool = True) -> None:
        self.value, self.level, self.indent, self.allow_nan = value, level, indent, allow_nan
        self.text = readable_json(value, indent=indent, allow_nan=allow_nan, level=level)

    def at(self, level: int, indent: int, allow_nan: bool) -> str:
        if (level, indent, allow_nan) == (self.level, self.indent, self.allow_nan):
            return self.text
        return readable_json(self.value, indent=indent, allow_nan=allow_nan, level=level)


PLAIN = (str, int, float, bool, type(None))  # bool is an int; listed for the reader

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


def _flat(values: list[Any] | tuple[Any, ...], allow_nan: bool) -> str:
    """A list of plain values on one line, as json.dumps writes it. A row of finite floats (most
    of a report's bytes: its matrices) is joined straight from float's repr."""
    if all(type(v) is float for v in values) and all(map(math.isfinite, values)):
        return "[" + ", ".join(map(float.__repr__, values)) + "]"
    return "[" + ", ".join([_scalar(v, allow_nan) for v in values]) + "]"


def _key(key: Any) -> str:
    # As the json module does: a key that is not a string is written as its JSON text, quoted.
    return _STRING(key if isinstance(key, str) else json.dumps(key))


def _lay_out(value: Any, level: int, indent: int, allow_nan: bool, parts: list[str]) -> None:
    """Append ``value``'s text to ``parts``: plain values are written where they stand, without
    a call of their own (a report holds a hundred thousand of them)."""
    if isinstance(value, PLAIN):
        parts.append(_scalar(value, allow_nan))
        return
    if isinstance(value, dict):
        if not value:
            parts.append("{}")
            return
        items: Any = [(_key(k) + ": ", v) for k, v in value.items()]
        opening, closing = "{", "}"
    elif isinstance(value, (list, tuple)):
        if all(isinstance(v, PLAIN) for v in value):
            parts.append(_flat(value, allow_nan))  # a row, a shape, a list of names (or nothing)
            return
        items = [("", v) for v in value]
        opening, closing = "[", "]"
    elif isinstance(value, Prelaid):
        parts.append(value.at(level, indent, allow_nan))
        return
    else:
        parts.append(json.dumps(value, allow_nan=allow_nan))  # what json makes of anything else
        return
    pad = " " * (indent * (level + 1))
    parts.append(opening)
    separator = "\n" + pad
    for label, item in items:
        parts.append(separator + label)
        separator = ",\n" + pad
        if isinstance(item, PLAIN):
            parts.append(_scalar(item, allow_nan))
        else:
            _lay_out(item, level + 1, indent, allow_nan, parts)
    parts.append("\n" + " " * (indent * level) + closing)
