"""Pointing at the source line that most likely holds a mistake the evidence already named.

The submission is read as text and parsed with ``ast``; it is never imported or run here. The
file is hostile: it may be huge, not UTF-8, not valid Python, or nested deeply enough to exhaust
the parser. Any of that means "no location", never an error, and a location never creates a
diagnosis: it is only attached to one the observations produced.

Each mistake has a finder that looks for its typical shape in the code: for ``scale-by-dk`` a
division by a size taken from the last axis without a square root, for ``batch-transpose`` a
``.T`` or ``np.dot`` on the keys, and so on. Names are followed through simple assignments
(``d_k = Q.shape[-1]``), and the graded function's own parameters tell which array is Q, K or V.
Code under ``if __name__ == "__main__":`` is ignored.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from grader.diagnosis import fixes, locate_softmax
from grader.diagnosis.inplace import in_place_statement
from grader.diagnosis.locate_dtype import INTEGER_TYPES, names_integer, narrowing_call
from grader.diagnosis.locate_softmax import axis_argument
from grader.diagnosis.locate_softmax import call_name as _call_name
from grader.diagnosis.locate_softmax import dotted as _dotted
from grader.diagnosis.locate_softmax import number as _number
from grader.diagnosis.model import Diagnosis, Location
from grader.frameworks import parse_source
from grader.fsutil import read_regular
from grader.notebook import NotebookSource

MAX_BYTES = 100_000  # a submission larger than this is not parsed (real ones are a few KB)
MAX_NODES = 40_000  # nor one whose syntax tree is larger: locating must stay a few milliseconds
MAX_LINE = 200  # characters of the source line kept in a location
ALIAS_DEPTH = 6  # how many simple assignments a name is followed through

# Which size an index into a shape gives, by role: Q.shape[-1] is d_k, K.shape[-2] is T_k, ...
AXIS_SIZES = {
    ("Q", -1): "d_k", ("K", -1): "d_k", ("Q", -2): "T_q", ("K", -2): "T_k", ("V", -2): "T_k", ("V", -1): "d_v",
    ("Q", 0): "shape0", ("K", 0): "shape0", ("V", 0): "shape0", ("Q", 1): "shape1", ("K", 1): "shape1", ("V", 1): "V1",
    ("Q", 2): "shape2", ("K", 2): "shape2",
}


@dataclass(frozen=True)
class Factor:
    """What a scale expression is made of: a size (d_k, T_q, ..., "const", "?") and its power."""

    base: str
    power: float


@dataclass
class Source:
    """A submission's source, parsed once, with its lines for quoting."""

    path: str
    lines: list[str]
    tree: ast.Module
    function: str
    roles: dict[str, str] = field(default_factory=dict)  # parameter name -> "Q" / "K" / "V"
    aliases: dict[str, ast.expr] = field(default_factory=dict)  # name -> the expression last assigned to it
    scope: dict[int, int] = field(default_factory=dict)  # id(node) -> rank: 0 graded function, 1 other code, 2 demo code
    all_nodes: list[ast.AST] = field(default_factory=list)
    by_kind: dict[tuple[type, ...], list[Any]] = field(default_factory=dict)

    def inputs(self) -> dict[str, str]:
        """The one-letter input names of the fixes' code (Q, K, V; q, k, v) -> the names to write
        in this submission: a letter the graded function uses itself stays, any other becomes the
        function's parameter of that role (``key`` for K and k in ``def attention(query, key, value)``)."""
        used = {n.id for n in self.all_nodes if isinstance(n, ast.Name) and self.scope.get(id(n)) == 0}
        params: dict[str, str] = {}
        for name, role in self.roles.items():
            params.setdefault(role, name)
        return {letter: letter if letter in used else params[letter.upper()] for letter in "QKVqkv" if letter.upper() in params}

    def location(self, node: ast.AST) -> Location | None:
        line = getattr(node, "lineno", None)
        if not isinstance(line, int) or not 1 <= line <= len(self.lines):
            return None
        return Location(file=self.path, line=line, code=self.lines[line - 1].strip()[:MAX_LINE])


def read_source(path: Path) -> str | None:
    try:
        data = read_regular(path, MAX_BYTES)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace") if len(data) <= MAX_BYTES else None


def parse(path: Path, function: str, text: str | None = None) -> Source | None:
    """The submission's syntax tree, indexed; ``text`` replaces the file's own (a notebook's
    joined code cells)."""
    if text is None:
        text = read_source(path)
    if text is None or len(text) > MAX_BYTES:
        return None
    try:
        tree = parse_source(text)  # most often the tree prepare_submission parsed already
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None
    source = Source(str(path), text.splitlines(), tree, function)
    return source if _index(source) else None


# ---------------------------------------------------------------------------------------------
# Indexing the module


def _is_main_block(node: ast.AST) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    parts = [node.test.left, *node.test.comparators]
    return any(isinstance(p, ast.Name) and p.id == "__name__" for p in parts)


def _graded_def(source: Source) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The graded function, or the __call__ of the class whose instance carries the graded name."""
    classes: dict[str, ast.ClassDef] = {}
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    target: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    instance_of: str | None = None
    for node in source.tree.body:  # the last binding of the name is the one graded
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node
            if node.name == source.function:
                target, instance_of = node, None
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = node
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == source.function for t in node.targets):
            if isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name):
                instance_of = node.value.func.id
            elif isinstance(node.value, ast.Name) and node.value.id in functions:  # attention = attention_fast
                target, instance_of = functions[node.value.id], None
    if target is None and instance_of in classes:
        for item in classes[instance_of].body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "__call__":
                return item
    return target


def _index(source: Source) -> bool:
    """Roles, aliases and the rank of every node; False if the tree is too large to search."""
    graded = _graded_def(source)
    if graded is not None:
        params = [a.arg for a in graded.args.posonlyargs + graded.args.args]
        if params and params[0] in ("self", "cls"):
            params = params[1:]
        source.roles = dict(zip(params[:3], ("Q", "K", "V")))
    for name, role in (("Q", "Q"), ("K", "K"), ("V", "V"), ("q", "Q"), ("k", "K"), ("v", "V")):
        source.roles.setdefault(name, role)
    # Breadth-first with the rank of the enclosing code: the graded function first.
    stack: list[tuple[ast.AST, int]] = [(source.tree, 1)]
    while stack:
        if len(source.scope) > MAX_NODES:
            return False
        node, rank = stack.pop()
        if node is graded:
            rank = 0
        elif _is_main_block(node):
            rank = 2
        source.scope[id(node)] = rank
        source.all_nodes.append(node)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and rank < 2:
            source.aliases[node.targets[0].id] = node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute) and rank < 2:
            source.aliases.setdefault(_dotted(node.targets[0]), node.value)  # self.scale = d ** 0.5
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and rank < 2:
            # A parameter's default stands for it where the caller leaves it out: softmax(x, axis=1).
            positional = node.args.posonlyargs + node.args.args
            for arg, default in zip(positional[len(positional) - len(node.args.defaults):], node.args.defaults):
                source.aliases.setdefault(arg.arg, default)
            for arg, keyword_default in zip(node.args.kwonlyargs, node.args.kw_defaults):
                if keyword_default is not None:
                    source.aliases.setdefault(arg.arg, keyword_default)
        stack.extend((child, rank) for child in ast.iter_child_nodes(node))
    return True


def _nodes(source: Source, kind: type | tuple[type, ...]) -> list[Any]:
    """Nodes of a kind outside demo code, the graded function's first, then in line order."""
    key = kind if isinstance(kind, tuple) else (kind,)
    if key not in source.by_kind:
        found = [n for n in source.all_nodes if isinstance(n, kind) and source.scope.get(id(n), 1) < 2]
        source.by_kind[key] = sorted(found, key=lambda n: (source.scope.get(id(n), 1), getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
    return source.by_kind[key]


# ---------------------------------------------------------------------------------------------
# Reading expressions


def _resolve(source: Source, node: ast.expr, depth: int = 0) -> ast.expr:
    while depth < ALIAS_DEPTH:
        if isinstance(node, ast.Name) and node.id in source.aliases and node.id not in source.roles:
            node = source.aliases[node.id]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _dotted(node) in source.aliases:
            node = source.aliases[_dotted(node)]  # self.scale, set in the same class
        else:
            break
        depth += 1
    return node


def _role(source: Source, node: ast.expr, depth: int = 0) -> str | None:
    """Which input array an expression stands for (Q, K, V), following simple assignments."""
    if depth > ALIAS_DEPTH:
        return None
    if isinstance(node, ast.Name):
        if node.id in source.roles:
            return source.roles[node.id]
        if node.id in source.aliases:
            return _role(source, source.aliases[node.id], depth + 1)
        return None
    if isinstance(node, ast.Call) and node.args and _call_name(node) in ("asarray", "array", "astype", "float32", "float64", "copy"):
        return _role(source, node.args[0], depth + 1)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("astype", "copy"):
        return _role(source, node.func.value, depth + 1)
    return None


def _size(source: Source, node: ast.expr, depth: int = 0) -> str | None:
    """d_k, T_q, T_k, d_v, shape0, shape1 for a size read from an input's shape, else None."""
    if depth > ALIAS_DEPTH:
        return None
    node = _resolve(source, node)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        role = _role(source, node.value.value)
        index = _number(node.slice)
        if role is not None and index is not None:
            return AXIS_SIZES.get((role, int(index)))
    # The rank taken for a size: K.ndim, k.dim(), len(K.shape), whatever the array is.
    if isinstance(node, ast.Attribute) and node.attr == "ndim" or isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("dim", "ndimension") and not node.args:
        return "ndim"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" and len(node.args) == 1:
        role, index = _role(source, node.func.value), _number(node.args[0])  # torch: q.size(-1)
        if role is not None and index is not None:
            return AXIS_SIZES.get((role, int(index)))
    if isinstance(node, ast.Call) and _call_name(node) == "len" and node.args:
        arg = node.args[0]
        if isinstance(arg, ast.Attribute) and arg.attr == "shape":
            return "ndim"
        if isinstance(arg, ast.Subscript) and _role(source, arg.value) is not None:
            return "shape1"
        if _role(source, arg) is not None:
            return "shape0"
    if isinstance(node, ast.Call) and _call_name(node) in ("float", "int") and node.args:
        return _size(source, node.args[0], depth + 1)
    return None


def factor(source: Source, node: ast.expr, depth: int = 0) -> Factor | None:
    """What a divisor or multiplier is: a size to some power, a constant, or None if unknown."""
    if depth > ALIAS_DEPTH:
        return None
    node = _resolve(source, node)
    size = _size(source, node)
    if size is not None:
        return Factor(size, 1.0)
    if _number(node) is not None:
        return Factor("const", 1.0)
    if isinstance(node, ast.IfExp):  # Q.shape[2] if Q.ndim > 3 else Q.shape[-1]: the branch that is no d_k
        branches = [f for f in (factor(source, node.body, depth + 1), factor(source, node.orelse, depth + 1)) if f is not None]
        return next((f for f in branches if f.base != "d_k"), branches[0] if branches else None)
    if isinstance(node, ast.Call) and _call_name(node) in ("sqrt", "rsqrt") and node.args:
        inner = factor(source, node.args[0], depth + 1)
        power = 0.5 if _call_name(node) == "sqrt" else -0.5
        return Factor(inner.base, inner.power * power) if inner else None
    if isinstance(node, ast.Call) and _call_name(node) in ("log", "log2", "log10", "log1p", "exp", "cbrt") and node.args:
        inner = factor(source, node.args[0], depth + 1)
        return Factor(inner.base, math.nan) if inner else None  # a function of the size, no power
    if isinstance(node, ast.Call) and _call_name(node) in ("pow", "power") and len(node.args) == 2:
        inner, exponent = factor(source, node.args[0], depth + 1), _number(node.args[1])
        return Factor(inner.base, inner.power * exponent) if inner and exponent is not None else None
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Pow):
            inner, exponent = factor(source, node.left, depth + 1), _number(node.right)
            if exponent is None and isinstance(node.right, ast.BinOp):  # d_k ** (1 / 4)
                a, b = _number(node.right.left), _number(node.right.right)
                exponent = a / b if a is not None and b and isinstance(node.right.op, ast.Div) else None
            return Factor(inner.base, inner.power * exponent) if inner and exponent is not None else None
        if isinstance(node.op, (ast.Div, ast.Mult)):
            left, right = factor(source, node.left, depth + 1), factor(source, node.right, depth + 1)
            sign = -1.0 if isinstance(node.op, ast.Div) else 1.0
            if left is not None and left.base == "const" and right is not None:
                return Factor(right.base, sign * right.power)  # 1 / sqrt(d_k), 2 * d_k
            if right is not None and right.base == "const" and left is not None:
                return left
    return None


@dataclass(frozen=True)
class ScaleSite:
    """An expression of the source that scales the scores, and by how much."""

    node: ast.AST
    factor: Factor  # the effect on the scores: d_k^-0.5 for "/ np.sqrt(d_k)"
    operand: ast.expr  # the factor as written there: "np.sqrt(d_k)", "scale"


def scale_sites(source: Source) -> Iterator[ScaleSite]:
    """Every multiplication or division by something that reads like a scale factor."""
    for node in _nodes(source, (ast.BinOp, ast.AugAssign)):
        op = node.op
        if not isinstance(op, (ast.Div, ast.Mult)):
            continue
        operands = [node.value] if isinstance(node, ast.AugAssign) else [node.right, node.left]
        if isinstance(op, ast.Div):
            operands = operands[:1]
        for operand in operands:
            if _is_array_like(source, operand):
                continue
            found = factor(source, operand)
            if found is not None:
                power = -found.power if isinstance(op, ast.Div) else found.power
                yield ScaleSite(node, Factor(found.base, power), operand)
                break


def _is_array_like(source: Source, node: ast.expr) -> bool:
    node = _resolve(source, node)
    if _role(source, node) is not None:
        return True
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult) or isinstance(node, ast.Call) and _call_name(node) in ("matmul", "dot", "einsum", "exp", "softmax")


def _exponent_near(power: float, target: float) -> bool:
    return abs(power - target) < 1e-6


def _definitions(source: Source, operand: ast.expr) -> list[ast.expr]:
    """What the names in a scale factor were assigned, outermost first: for ``s * scale`` with
    ``scale = 1 / np.sqrt(d)`` and ``d = V.shape[-1]``, those two right-hand sides."""
    chain: list[ast.expr] = []
    expr = operand
    for _ in range(ALIAS_DEPTH):
        name = next((n for n in ast.walk(expr) if isinstance(n, ast.Name) and n.id in source.aliases and n.id not in source.roles), None)
        if name is None or source.aliases[name.id] in chain:
            break
        expr = source.aliases[name.id]
        chain.append(expr)
    return chain


def _makes_power(expr: ast.expr) -> bool:
    """Does the expression raise a size to a power (a root, a division, **), not just read it?"""
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Pow, ast.Div)) or isinstance(n, ast.Call) and _call_name(n) in ("sqrt", "rsqrt") for n in ast.walk(expr))


ScaleMistake = Literal["size", "power", "use"]


def _scale_finder(predicate: Callable[[Factor], bool], wrong: ScaleMistake = "power") -> Callable[[Source, Diagnosis], ast.AST | None]:
    """The line of the scale a diagnosis blames, by ``wrong``, the part that is the mistake: the
    size read (K.shape[0], a constant), where a name holding it is assigned; the power, where
    the root or division is written; the use (after the softmax), where it is applied."""
    def find(source: Source, d: Diagnosis) -> ast.AST | None:
        for site in scale_sites(source):
            if not predicate(site.factor):
                continue
            chain = [] if wrong == "use" else _definitions(source, site.operand)
            if wrong == "size" and chain:
                return chain[-1]
            return next((e for e in chain if _makes_power(e)), site.node)
        return None

    return find


def _scaled_twice(source: Source) -> ast.AST | None:
    """The second of two 1/sqrt(d_k) scalings (Q pre-scaled and the scores divided again, or one
    division written twice): together they divide by d_k, and the second is the one to drop."""
    roots = [site for site in scale_sites(source) if site.factor.base == "d_k" and _exponent_near(site.factor.power, -0.5)]
    return roots[1].node if len(roots) >= 2 else None


def _products(source: Source) -> list[ast.AST]:
    """Where the scores are formed: a matrix product (or dot, einsum) that involves the keys."""
    found: list[ast.AST] = []
    for node in _nodes(source, (ast.BinOp, ast.Call)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            if _mentions_role(source, node, "K"):
                found.append(node)
        elif isinstance(node, ast.Call) and _call_name(node) in ("matmul", "dot", "einsum", "tensordot", "inner", "bmm") and _mentions_role(source, node, "K"):
            found.append(node)
    return found


def _mentions_role(source: Source, node: ast.AST, role: str) -> bool:
    return any(isinstance(n, ast.Name) and _role(source, n) == role for n in ast.walk(node))


def find_scale_missing(source: Source, d: Diagnosis) -> ast.AST | None:
    products = _products(source)
    return products[0] if products else None


def find_transpose(source: Source, d: Diagnosis) -> ast.AST | None:
    candidates: list[tuple[bool, ast.AST]] = []
    for node in _nodes(source, (ast.Attribute, ast.Call)):
        if isinstance(node, ast.Attribute) and node.attr == "T":
            candidates.append((_role(source, node.value) != "K", node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "transpose" and not node.args:
            candidates.append((_role(source, node.func.value) != "K", node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("transpose", "swapaxes", "permute") and [_number(a) for a in node.args] in ([0.0, 1.0], [1.0, 0.0], [0.0, 2.0, 1.0]):
            candidates.append((_role(source, node.func.value) != "K", node))  # k.transpose(0, 1): a single sequence's axes
        elif isinstance(node, ast.Call) and _dotted(node.func) in ("np.transpose", "numpy.transpose") and len(node.args) == 1:
            candidates.append((_role(source, node.args[0]) != "K", node))
        elif isinstance(node, ast.Call) and _dotted(node.func) in ("np.dot", "numpy.dot") or isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "dot":
            candidates.append((not _mentions_role(source, node, "K"), node))
    candidates.sort(key=lambda c: c[0])  # stable: on K first, then in the order found
    return candidates[0][1] if candidates else None


def find_wrong_axis(source: Source, d: Diagnosis) -> ast.AST | None:
    return locate_softmax.find_wrong_axis(_nodes(source, ast.Call), lambda n: _resolve(source, n), source.all_nodes)


def find_softmax_missing(source: Source, d: Diagnosis) -> ast.AST | None:
    for node in _nodes(source, ast.BinOp):
        if isinstance(node.op, ast.MatMult) and _mentions_role(source, node.right, "V"):
            return node
    for node in _nodes(source, ast.Call):
        if _call_name(node) in ("matmul", "dot", "einsum") and _mentions_role(source, node, "V"):
            return node
    return _last_return(source)


def find_unstable(source: Source, d: Diagnosis) -> ast.AST | None:
    for node in _nodes(source, ast.Call):
        if _call_name(node) != "exp" or not node.args:
            continue
        arg = _resolve(source, node.args[0])
        if not (isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Sub)):
            return node
        shift = arg.right
        if isinstance(shift, ast.Call) and _call_name(shift) in ("max", "amax") and axis_argument(shift) == "none":
            return node  # shifted by the maximum of the whole array
    return None


def _last_return(source: Source) -> ast.AST | None:
    returns = [n for n in _nodes(source, ast.Return) if source.scope.get(id(n)) == 0]
    return returns[-1] if returns else None


def find_returns_weights(source: Source, d: Diagnosis) -> ast.AST | None:
    return _last_return(source)


def find_squeeze(source: Source, d: Diagnosis) -> ast.AST | None:
    return next((n for n in _nodes(source, ast.Call) if _call_name(n) == "squeeze"), None) or _last_return(source)


def find_mutation(source: Source, d: Diagnosis) -> ast.AST | None:
    wanted = d.evidence.get("array")
    candidates: list[tuple[bool, ast.AST]] = []
    for node in _nodes(source, (ast.AugAssign, ast.Assign, ast.Call)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.AugAssign):
            targets = [node.target]
        elif isinstance(node, ast.Assign):
            targets = [t.value for t in node.targets if isinstance(t, ast.Subscript)]
        elif isinstance(node, ast.Call):
            targets = [k.value for k in node.keywords if k.arg == "out"]
        for target in targets:
            base = target.value if isinstance(target, ast.Subscript) else target
            role = _role(source, base) if isinstance(base, ast.Name) and base.id in source.roles else None
            if role is not None:
                candidates.append((role != wanted, node))
    candidates.sort(key=lambda c: c[0])
    return candidates[0][1] if candidates else None


def find_random(source: Source, d: Diagnosis) -> ast.AST | None:
    """A random draw, else an array left uninitialised (np.empty, torch.empty: whatever memory held)."""
    calls = _nodes(source, ast.Call)
    for node in calls:
        name = _dotted(node.func)
        if "random" in name.split(".") or name.endswith(("default_rng", "dropout", "rand", "randn", "normal", "uniform", "binomial")):
            return node
    return next((n for n in calls if _call_name(n) in ("empty", "empty_like")), None)


def find_hardcoded(source: Source, d: Diagnosis) -> ast.AST | None:
    for node in _nodes(source, ast.If):
        if any(isinstance(n, ast.Attribute) and n.attr in ("shape", "tobytes") for n in ast.walk(node.test)):
            return node
    for node in _nodes(source, (ast.Dict, ast.List, ast.Tuple)):
        if len(getattr(node, "elts", None) or getattr(node, "keys", [])) >= 16:
            return node
    return None


def find_timeout(source: Source, d: Diagnosis) -> ast.AST | None:
    loops = _nodes(source, ast.While)
    if loops:
        return loops[0]
    for node in _nodes(source, ast.Call):
        if _dotted(node.func) in ("time.sleep", "sleep"):
            return node
    return None


def find_bad_return(source: Source, d: Diagnosis) -> ast.AST | None:
    return _last_return(source)


def find_allocation(source: Source, d: Diagnosis) -> ast.AST | None:
    for node in _nodes(source, ast.Call):
        if _call_name(node) in ("ones", "zeros", "empty", "full", "tile", "repeat", "outer", "kron", "broadcast_to"):
            return node
    return None


def _calls_named(*names: str) -> Callable[[Source, Diagnosis], ast.AST | None]:
    def find(source: Source, d: Diagnosis) -> ast.AST | None:
        return next((n for n in _nodes(source, ast.Call) if _call_name(n) in names), None)

    return find


def find_integer(source: Source, d: Diagnosis) -> ast.AST | None:
    """A floor division, an astype to an integer type, or an array made with an integer dtype."""
    for node in _nodes(source, (ast.BinOp, ast.AugAssign, ast.Call)):
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.FloorDiv):
            operands = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.target, node.value]
            if not all(_size(source, o) is not None or _number(o) is not None for o in operands):  # T // 2 is an index
                return node
        elif isinstance(node, ast.Call):
            if _call_name(node) == "astype" and node.args and names_integer(node.args[0]):
                return node
            if _call_name(node) in INTEGER_TYPES[1:] and node.args and isinstance(node.func, ast.Attribute):
                return node  # np.int64(x)
            if any(k.arg == "dtype" and names_integer(k.value) for k in node.keywords):
                return node
    return None


_GRAPH_CUTS = ("detach", "detach_", "numpy", "item", "tolist", "stop_gradient")  # calls that leave the autograd graph
_NO_GRAD = ("no_grad", "inference_mode", "set_grad_enabled")


def _at_line(source: Source, d: Diagnosis) -> ast.AST | None:
    """The first statement on the line the worker saw an exception come from (in a notebook, a
    line already given as cell and line is not one of the joined source's)."""
    line = d.evidence.get("line")
    if not isinstance(line, int) or d.evidence.get("cell") is not None:
        return None
    return next((n for n in source.all_nodes if isinstance(n, ast.stmt) and n.lineno == line), None)


def _cuts_graph(node: ast.Call) -> bool:
    name = _call_name(node)
    if name == "stop_gradient":  # on the maximum subtracted for stability it changes no gradient
        return not (node.args and isinstance(node.args[0], ast.Call) and _call_name(node.args[0]) in ("max", "amax"))
    return name in _GRAPH_CUTS or name in _NO_GRAD


def find_not_differentiable(source: Source, d: Diagnosis) -> ast.AST | None:
    """Where the exception came from, else the first cut of the graph: .detach(), .numpy(),
    .item(), .tolist(), stop_gradient (not on the max-shift), torch.no_grad() (called, or as a bare
    decorator)."""
    found = _at_line(source, d)
    if found is not None:
        return found
    if d.evidence.get("in_place"):  # the in-place statement after the operation torch names
        saved = d.evidence.get("saved_by")
        graded = [n for n in _nodes(source, ast.stmt) if source.scope.get(id(n)) == 0]
        return in_place_statement(graded, saved if isinstance(saved, str) else None)
    if d.evidence.get("how") == "backward-raised":  # raised by the framework, checking what the backward returned
        return find_wrong_backward(source, d)
    for node in _nodes(source, (ast.Call, ast.FunctionDef)):
        if isinstance(node, ast.Call) and _cuts_graph(node):
            return node
        if isinstance(node, ast.FunctionDef) and any(_dotted(x).split(".")[-1] in _NO_GRAD for x in node.decorator_list):
            return node.decorator_list[0]
    return None


def find_wrong_backward(source: Source, d: Diagnosis) -> ast.AST | None:
    """A hand-written backward (an autograd.Function's, or the one jax's defvjp is given), else a
    stopped gradient."""
    defs = _nodes(source, ast.FunctionDef)
    for node in defs:
        if node.name == "backward":
            return node
    for node in _nodes(source, ast.Call):
        if _call_name(node) == "defvjp" and len(node.args) >= 2 and isinstance(node.args[1], ast.Name):
            name = node.args[1].id
            return next((f for f in defs if f.name == name), node)
    return next((n for n in _nodes(source, ast.Call) if _call_name(n) in ("stop_gradient", "detach") and _cuts_graph(n)), None)


FINDERS: dict[str, Callable[[Source, Diagnosis], ast.AST | None]] = {
    "scale-by-dk": lambda source, d: _scale_finder(lambda f: f.base in ("d_k", "shape1") and _exponent_near(f.power, -1.0))(source, d) or _scaled_twice(source),
    "scale-multiplied": _scale_finder(lambda f: f.base == "d_k" and f.power > 0),
    "scale-by-seq-len": _scale_finder(lambda f: f.base in ("T_q", "T_k", "shape0", "shape1", "shape2", "V1") and f.power < 0, "size"),
    "scale-by-dv": _scale_finder(lambda f: f.base in ("d_v", "V1"), "size"),
    "scale-constant": _scale_finder(lambda f: f.base in ("const", "ndim"), "size"),
    "scale-other": _scale_finder(lambda f: f.base in ("d_k", "?") and not _exponent_near(f.power, -0.5)),
    "scale-missing": find_scale_missing,
    "batch-transpose": find_transpose,
    "softmax-wrong-axis": find_wrong_axis,
    "softmax-missing": find_softmax_missing,
    "softmax-unstable": find_unstable,
    "returns-weights": find_returns_weights,
    "input-mutated": find_mutation,
    "nondeterministic": find_random,
    "hardcoded": find_hardcoded,
    "timeout": find_timeout,
    "bad-return": find_bad_return,
    "axis-dropped": find_squeeze,
    "memory-limit": find_allocation,
    "scale-after-softmax": _scale_finder(lambda f: f.base == "d_k", "use"),
    "softmax-unnormalised": _calls_named("exp"),
    "softmax-log": _calls_named("log", "log_softmax", "logsumexp"),
    "mask-unasked": _calls_named("tril", "triu", "masked_fill"),
    "integer-truncation": find_integer,
    "reduced-precision": lambda source, d: narrowing_call(_nodes(source, ast.Call)),
    "not-differentiable": find_not_differentiable,
    "gradient-mismatch": find_wrong_backward,
}
