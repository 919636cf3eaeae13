"""In-place operations that break autograd: told from the framework's error, found in the code.

PyTorch saves some results for the backward (``exp`` keeps its output, a division its divisor)
and checks at backward time that nothing changed them since: ``s.exp_(); s /= s.sum(-1)`` makes
the backward raise "one of the variables needed for gradient computation has been modified by an
inplace operation: [...], which is output 0 of ExpBackward0 ...". The same forward values come
from out-of-place operations (``s = s.exp()``, ``s = s / ...``), which is the fix.

The error names the operation whose saved result was changed (``ExpBackward0``): the statement to
point at is the first in-place one after that operation, in the graded function. Read from the
syntax tree only, like everything in grader.diagnosis.locate.
"""

from __future__ import annotations

import ast
import re
from typing import Iterable

from grader.diagnosis.locate_softmax import call_name

# What torch says when an in-place operation broke autograd: at backward time (a saved tensor
# changed), or during the call (an input that requires gradients, or a view of one, written in place).
_IN_PLACE = re.compile(r"modified by an inplace operation|used in an in-place operation|is being modified inplace|inplace operation", re.IGNORECASE)
_SAVED_BY = re.compile(r"output \d+ of ([A-Za-z]+?)(?:Backward\d*)?(?![A-Za-z0-9])")

FIX = (
    "An in-place operation changed a tensor autograd saved for the backward: write the out-of-place "
    "form, s = s.exp() and s = s / s.sum(-1, keepdim=True), not s.exp_() or s /= ... "
    "(or weights = torch.softmax(scores, dim=-1))"
)


def is_in_place_error(message: str) -> bool:
    return bool(_IN_PLACE.search(message))


def saved_by(message: str) -> str | None:
    """The operation whose saved result was changed, lower case: ``ExpBackward0`` or ``Exp``
    (after an in-place ``exp_``) -> "exp"."""
    found = _SAVED_BY.search(message)
    return found.group(1).lower() if found else None


def _is_in_place_method(name: str) -> bool:
    # exp_, div_, masked_fill_, ...: torch's trailing underscore; never _private or __dunder__.
    return len(name) > 1 and name.endswith("_") and not name.startswith("_") and name != "requires_grad_"


def _counters(statements: list[ast.stmt]) -> set[str]:
    """Names that hold Python numbers, not tensors: loop variables and names set from a number."""
    names: set[str] = set()
    for node in statements:
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, (int, float)):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _in_place(node: ast.stmt, counters: set[str]) -> bool:
    if isinstance(node, ast.AugAssign):  # s /= ..., s[..., 0] += ...
        base = node.target.value if isinstance(node.target, ast.Subscript) else node.target
        return not (isinstance(base, ast.Name) and base.id in counters)
    value = node.value if isinstance(node, (ast.Expr, ast.Assign)) else None
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and _is_in_place_method(value.func.attr)


def _makes(node: ast.stmt, op: str) -> bool:
    """Whether the simple statement calls the operation (``exp`` as exp(), .exp() or .exp_());
    a loop or a branch is judged by the statements in it."""
    if hasattr(node, "body"):
        return False
    return any(isinstance(n, ast.Call) and call_name(n).rstrip("_") == op for n in ast.walk(node))


def in_place_statement(statements: Iterable[ast.stmt], op: str | None) -> ast.stmt | None:
    """The in-place statement to blame, of the graded function's statements: the first after the
    one that makes ``op`` (the operation the error names), else the first of all."""
    ordered = sorted(statements, key=lambda n: (n.lineno, n.col_offset))
    counters = _counters(ordered)
    candidates = [n for n in ordered if _in_place(n, counters)]
    if op:
        made = next((n.lineno for n in ordered if _makes(n, op)), None)
        if made is not None:
            after = next((n for n in candidates if n.lineno > made), None)
            if after is not None:
                return after
    return candidates[0] if candidates else None
