"""Finding the line that writes a softmax's (or its reductions') wrong axis, for locate.py.

A wrong axis is written in many ways: ``np.max(x, axis=2)``, ``x.sum(1)``, ``torch.softmax(s, 1)``,
``s.softmax(dim=-2)``, ``jax.nn.softmax(s, axis=1)``, a module built elsewhere and applied later
(``self.softmax = nn.Softmax(dim=2)``, then ``self.softmax(scores)``: the line that builds it is
the one that names the axis), or no axis at all where the library then picks one from the rank
(``F.softmax(s)``) or takes the whole array (``scipy.special.softmax(s)``).

Whether the axis is the first or the second positional argument depends on who is called: a
module's function takes the array first (``torch.softmax(s, 1)``), a tensor's method does not
(``s.softmax(1)``), and a softmax module's constructor takes only the axis (``nn.Softmax(2)``).
The names the file imports tell a module from a tensor.

This module sits below locate.py, which imports it; so the few pure readers of a call that both
need (``call_name``, ``dotted``, ``number``) live here.
"""

from __future__ import annotations

import ast
from typing import Callable, Iterable, Sequence

# Calls whose axis argument is checked: reductions of a hand-written softmax and the softmaxes.
AXIS_CALLS = ("sum", "max", "amax", "softmax", "logsumexp", "log_softmax", "Softmax", "LogSoftmax")
CONSTRUCTORS = ("Softmax", "LogSoftmax")  # nn.Softmax(dim): the axis is the only argument
# Names that stand for a module, whether or not the file's imports say so (a notebook may have
# imported them in a cell the grader does not see).
USUAL_MODULES = {"np": "numpy", "numpy": "numpy", "torch": "torch", "F": "torch.nn.functional", "nn": "torch.nn", "jnp": "jax.numpy", "jax": "jax", "scipy": "scipy", "special": "scipy.special"}
# Softmaxes that, given no axis, pick one from the rank (torch, with a deprecation warning) or
# normalise the whole array (scipy): with no axis written, the call itself is the mistake.
IMPLICIT_AXIS = {
    "torch.nn.functional.softmax", "torch.nn.functional.log_softmax", "torch.nn.Softmax", "torch.nn.LogSoftmax",
    "scipy.special.softmax", "scipy.special.log_softmax",
}


def call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def dotted(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def number(node: ast.expr) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = number(node.operand)
        return -inner if inner is not None else None
    return None


def imported_names(nodes: Iterable[ast.AST]) -> dict[str, str]:
    """What each imported name stands for: ``F`` -> ``torch.nn.functional``, ``softmax`` ->
    ``scipy.special.softmax``; the usual aliases where the file does not import them."""
    names = dict(USUAL_MODULES)
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    names[root] = root  # import torch.nn binds torch
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def qualified(node: ast.expr, imports: dict[str, str]) -> str:
    """The dotted name of a callee with its imported root spelled out: nn.Softmax -> torch.nn.Softmax."""
    name = dotted(node)
    root, _, rest = name.partition(".")
    if root in imports:
        return imports[root] + ("." + rest if rest else "")
    return name


def _callee(node: ast.Call, imports: dict[str, str]) -> str:
    """What is called, by its imported name: ``sm`` of ``from torch.nn.functional import softmax as sm`` is softmax."""
    return qualified(node.func, imports).rpartition(".")[2] or call_name(node)


def _is_method(node: ast.Call, imports: dict[str, str]) -> bool:
    """A call on an array (``s.sum(1)``) rather than a module's function (``torch.sum(s, 1)``)."""
    if not isinstance(node.func, ast.Attribute):
        return False
    receiver = dotted(node.func.value)
    return receiver.split(".")[0] not in imports if receiver else True


def axis_argument(node: ast.Call, imports: dict[str, str] | None = None) -> ast.expr | None | str:
    """The expression given for the axis (``axis=``, ``dim=`` or by position), or "none"."""
    for keyword in node.keywords:
        if keyword.arg in ("axis", "dim"):
            return keyword.value
    known = USUAL_MODULES if imports is None else imports
    positional = 0 if _callee(node, known) in CONSTRUCTORS or _is_method(node, known) else 1
    if len(node.args) > positional:
        return node.args[positional]
    return "none"


def find_wrong_axis(calls: Sequence[ast.Call], resolve: Callable[[ast.expr], ast.expr], nodes: Iterable[ast.AST]) -> ast.AST | None:
    """The first call that names an axis other than the last, or a softmax that names none where
    its library then picks one; else a sum over the whole array. ``calls`` come in the order they
    are to be tried, ``resolve`` follows a name to the expression assigned to it, ``nodes`` are
    the file's (for its imports)."""
    imports = imported_names(n for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom)))
    whole = None
    for node in calls:
        name = _callee(node, imports)
        if name not in AXIS_CALLS:
            continue
        axis = axis_argument(node, imports)
        if axis == "none":
            if qualified(node.func, imports) in IMPLICIT_AXIS:
                return node  # F.softmax(s), nn.Softmax(): the axis is the library's guess
            if whole is None and name == "sum":
                whole = node
            continue
        if isinstance(axis, ast.Name):
            axis = resolve(axis)
        value = number(axis) if isinstance(axis, ast.expr) else None
        if isinstance(axis, ast.Constant) and axis.value is None:
            whole = whole or node
        elif value is not None and value != -1:
            return node
        elif isinstance(axis, ast.Tuple):
            return node
    return whole
