"""What the grader accepts of the values a user gives it, wherever they are given: an option of
`grade`, a key of a suite, a field of grader.Options. The bounds of every limit and the form of
the graded function's name live here, so that the command line, a suite and Python refuse the
same values with the same words, and the help and the README can quote the same numbers.
"""

from __future__ import annotations

import keyword
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Bound:
    """The range of one limit, both ends included."""

    low: float
    high: float
    unit: str  # as the messages and the help write it after a number: "s", "MB", "KB"

    def problem(self, value: float) -> str | None:
        """Why ``value`` is no setting of this limit, or None. A NaN or an infinity never is
        one: NaN compares false with everything, so a range check alone lets it through."""
        if isinstance(value, float) and not math.isfinite(value):  # an int is finite, however long
            return f"must be a finite number, got {value}"
        if value < self.low:
            return f"must be at least {_show(self.low)} {self.unit}, got {_show(value)}"
        if value > self.high:
            return f"must be at most {_show(self.high)} {self.unit}, got {_show(value)}"
        return None


def _show(value: float) -> str:
    if isinstance(value, int):
        # Never the digits of a huge integer: one line, and Python refuses str() past 4300 digits.
        return str(value) if abs(value) < 10**15 else "a whole number of more than 15 digits"
    return f"{value:g}"


# Beyond these a limit is a typo, not a setting (a worker given 1e308 seconds was sent a CPU limit
# of 309 digits). An hour is far more than any take-home's attention needs; a terabyte is more
# address space than a grading machine backs with memory; printed output is kept in memory for
# every submission whose report is still being written, so 16 MB each.
TIMEOUT_S = Bound(0.1, 3600, "s")
MEMORY_MB = Bound(64, 1024 * 1024, "MB")
OUTPUT_KB = Bound(1, 16 * 1024, "KB")


def function_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be the graded function's name, or None. It must be what `def`
    accepts: an identifier that is not a keyword. A name in double underscores (__import__,
    __init__) is Python's own, never the function a take-home asks for."""
    if not name.isidentifier() or keyword.iskeyword(name):
        return f"{name!r} is not a Python function name (an identifier that is not a keyword)"
    if name.startswith("__") and name.endswith("__"):
        return f"{name!r} is one of Python's special names, not a take-home's function"
    return None
