"""The dtypes a line of the submission names, for locating integer-truncation and reduced-precision.

Read from the syntax tree only, like everything in locate: ``astype(np.int64)``, ``dtype=int``,
``np.float32(x)``, ``jnp.asarray(x, dtype=jnp.float16)``, ``.half()``, ``.to(torch.float32)``.
"""

from __future__ import annotations

import ast
from typing import Iterable

from grader.diagnosis.locate_softmax import call_name, dotted

INTEGER_TYPES = ("int", "int8", "int16", "int32", "int64", "uint8", "intc", "int_", "long")
NARROW_TYPES = ("float16", "float32", "half", "single", "bfloat16", "f2", "f4", "<f2", "<f4", "e")
# Calls that make or convert an array and take the dtype as an argument or as dtype=.
_CONVERSIONS = ("astype", "asarray", "array", "to", "type", "tensor", "as_tensor", "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "full_like")


def _type_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        return dotted(node).split(".")[-1]
    return None


def names_integer(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in INTEGER_TYPES or node.value.startswith(("i", "<i", "u"))
    return (_type_name(node) or "") in INTEGER_TYPES


def names_narrow(node: ast.expr) -> bool:
    """A float type narrower than float64: float32, float16, bfloat16, in any spelling."""
    return (_type_name(node) or "") in NARROW_TYPES


def narrowing_call(calls: Iterable[ast.Call]) -> ast.Call | None:
    """The first call that narrows an array's floats: ``.astype(np.float32)``, ``dtype=jnp.float16``,
    ``np.float32(x)``, torch's ``.half()`` and ``.float()`` (a method: ``float(x)`` is Python's)."""
    for node in calls:
        name = call_name(node)
        method = isinstance(node.func, ast.Attribute)
        if method and name in ("half", "float", "bfloat16") and not node.args:
            return node
        if method and name in ("float16", "float32") and node.args:
            return node
        arguments = [*node.args, *(k.value for k in node.keywords if k.arg == "dtype")]
        if name in _CONVERSIONS and any(names_narrow(a) for a in arguments):
            return node
    return None
