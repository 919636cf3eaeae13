"""The suite: which cases exist, which checks run on them, tolerances, points and limits.

A suite is a YAML file (the default one is ``grader/fixtures/suite.yaml``). It is validated completely
before any grading starts, and every error names the file, the line and the key path, because a
task author editing YAML needs to know exactly where the mistake is.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Literal

import yaml

from grader.bounds import MEMORY_MB, OUTPUT_KB, TIMEOUT_S, Bound, function_name_problem
from grader.diagnosis.registry import BY_NAME
from grader.entry import Entry, parse_entry
from grader.errors import SuiteError

CHECK_KINDS = ("load", "shape", "weights", "outputs", "batch", "cross", "stability", "mutation", "determinism", "fresh", "mask", "gradients")
# Kinds only an array framework with autograd can be asked: absent (not failed) for NumPy
# submissions, so they neither score nor count toward a NumPy submission's maximum.
FRAMEWORK_ONLY_KINDS = ("gradients",)
# Kinds that need no stored case: `fresh` draws its own inputs at grading time.
CASELESS_KINDS = ("load", "fresh")
SEVERITIES = ("error", "warning", "off")
# Check groups a task author turns on or off with `groups:`; load and shape always run.
GROUP_OF_KIND = {
    "weights": "values", "outputs": "values", "cross": "values", "stability": "values", "fresh": "values",
    "batch": "batch", "mask": "masks",
}
GROUPS = ("values", "batch", "masks")
FRAMEWORK_SETTINGS = ("auto", "numpy", "torch", "jax")


@dataclass(frozen=True)
class Shape:
    """Sizes of one case. ``batch`` holds the leading axes: () for a single sequence."""

    batch: tuple[int, ...]
    tq: int
    tk: int
    dk: int
    dv: int

    def q(self) -> tuple[int, ...]:
        return self.batch + (self.tq, self.dk)

    def k(self) -> tuple[int, ...]:
        return self.batch + (self.tk, self.dk)

    def v(self) -> tuple[int, ...]:
        return self.batch + (self.tk, self.dv)

    def output(self) -> tuple[int, ...]:
        return self.batch + (self.tq, self.dv)

    def weights(self) -> tuple[int, ...]:
        return self.batch + (self.tq, self.tk)

    def describe(self) -> str:
        lead = "".join(f"B{i + 1}={b}, " if len(self.batch) > 1 else f"B={b}, " for i, b in enumerate(self.batch))
        return f"{lead}T_q={self.tq}, T_k={self.tk}, d_k={self.dk}, d_v={self.dv}"


@dataclass(frozen=True)
class MaskSpec:
    """A boolean mask (True = keep) of the scores' shape (..., T_q, T_k), see grader/masks.py.

    * causal: query i keeps keys 0..i (aligned at the top left, as np.tril(ones((T_q, T_k))));
    * padding: batch element b keeps its first ``lengths[b]`` keys (every head alike).
    """

    kind: Literal["causal", "padding"]
    lengths: tuple[int, ...] = ()

    def describe(self) -> str:
        return "causal mask" if self.kind == "causal" else f"padding mask (key lengths {list(self.lengths)})"


@dataclass(frozen=True)
class Case:
    """One stored case of a suite: its sizes and the seed of its inputs."""

    name: str
    seed: int
    shape: Shape
    magnitude: float = 1.0  # inputs are drawn with this standard deviation (large scores for stability)
    mask: MaskSpec | None = None


@dataclass(frozen=True)
class CheckSpec:
    """One check of a suite: what it checks, on which cases, for how many points."""

    id: str
    kind: str
    points: float
    cases: tuple[str, ...]
    requires: tuple[str, ...]
    title: str


@dataclass(frozen=True)
class Tolerance:
    """An element matches when |actual - expected| <= atol + rtol * |expected| (numpy's isclose)."""

    rtol: float
    atol: float


@dataclass(frozen=True)
class Limits:
    """A suite's limits for each worker."""

    timeout_s: float
    memory_mb: int
    output_bytes: int


@dataclass(frozen=True)
class Suite:
    """What a take-home asks for: the function, the cases, the checks and their points."""

    name: str
    version: int
    function: str
    cases: dict[str, Case]
    checks: tuple[CheckSpec, ...]
    tolerance: Tolerance
    limits: Limits
    severity: dict[str, str] = field(default_factory=dict)
    source: Path | None = None
    references: Path | None = None
    # Where the function is in a candidate's folder, which arrays it takes, what is off
    entry: Entry | None = None
    framework: str = "auto"
    disabled: tuple[str, ...] = ()  # ids of the checks turned off (by `groups:`, `gradients: off` or `enabled: false`)
    groups_off: tuple[str, ...] = ()  # the groups turned off: with `batch` off, fresh cases are single sequences

    @property
    def max_score(self) -> float:
        """Every check's points: the maximum of a PyTorch or JAX submission (see max_score_for)."""
        return float(sum(c.points for c in self.checks))

    def for_framework(self, framework: str) -> Suite:
        """The suite as a submission in ``framework`` is graded: for NumPy, without the checks
        that need autograd (``FRAMEWORK_ONLY_KINDS``), and a ``requires`` on them dropped."""
        if framework in ("torch", "jax") or not any(c.kind in FRAMEWORK_ONLY_KINDS for c in self.checks):
            return self
        absent = {c.id for c in self.checks if c.kind in FRAMEWORK_ONLY_KINDS}
        kept = tuple(replace(c, requires=tuple(r for r in c.requires if r not in absent)) for c in self.checks if c.id not in absent)
        return replace(self, checks=kept)

    def max_score_for(self, framework: str) -> float:
        """The maximum of a submission graded in ``framework``; for ``auto`` (each submission's
        own), NumPy's: the maximum a run reports for itself, each submission carrying its own."""
        return self.for_framework(framework).max_score

    def case_digests(self) -> dict[str, str]:
        """What each case's stored references depend on (its seed, sizes, magnitude and mask), so
        that a suite may use any subset of the cases a reference folder holds."""
        out = {}
        for n, c in sorted(self.cases.items()):
            data: dict[str, Any] = {"seed": c.seed, "batch": list(c.shape.batch), "tq": c.shape.tq, "tk": c.shape.tk, "dk": c.shape.dk, "dv": c.shape.dv}
            if c.magnitude != 1.0:
                data["magnitude"] = c.magnitude
            if c.mask is not None:
                data["mask"] = {"kind": c.mask.kind, "lengths": list(c.mask.lengths)}
            out[n] = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
        return out

    def digest(self) -> str:
        """Identifies what the stored references depend on: the cases and nothing else."""
        return hashlib.sha256(json.dumps(self.case_digests(), sort_keys=True).encode()).hexdigest()

    def fingerprint(self) -> str:
        """Identifies everything that can change a verdict (for caches of results)."""
        data = {
            "digest": self.digest(),
            "function": self.function,
            "checks": [(c.id, c.kind, c.points, c.cases, c.requires) for c in self.checks],
            "tolerance": (self.tolerance.rtol, self.tolerance.atol),
            "severity": sorted(self.severity.items()),
            "groups_off": list(self.groups_off),
            "version": self.version,
            "entry": str(self.entry) if self.entry else None,
            "framework": self.framework,
        }
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# Loading with line numbers


# libyaml's loader when PyYAML has it (the same nodes, marks and values), the Python one otherwise.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Doc:
    """A YAML document turned into plain Python, remembering the line of every key path.

    The loader composes the nodes and this walks them rather than letting the loader construct
    the whole document: every key path gets its line for the error messages, and a duplicate key
    is an error there (PyYAML keeps the last one silently). Scalars are constructed by the
    loader, which decides int / float / bool / str.
    """

    def __init__(self, source: str, loader: yaml.constructor.SafeConstructor) -> None:
        self.source = source
        self.lines: dict[tuple[str, ...], int] = {}
        self.loader = loader
        self.seen: set[int] = set()

    def convert(self, node: yaml.Node, path: tuple[str, ...]) -> Any:
        # An alias is the only way one node appears twice. Refused: a few nested aliases expand
        # to billions of values (a 654-byte file once took gigabytes), and a suite needs none.
        if id(node) in self.seen:
            raise self.error(path, f"YAML aliases are not allowed (this repeats the anchored value of line {node.start_mark.line + 1}; write it out)")
        self.seen.add(id(node))
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key = str(key_node.value)
                if key in out:
                    raise self.error(path + (key,), f"duplicate key '{key}'", key_node.start_mark.line + 1)
                self.lines[path + (key,)] = key_node.start_mark.line + 1
                out[key] = self.convert(value_node, path + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.convert(item, path + (str(i),)) for i, item in enumerate(node.value)]
        try:
            return self.loader.construct_object(node, deep=True)
        except ValueError:  # Python's own limits, met while building the value
            raise self.error(path, "not a value YAML can build: a whole number of more than 4300 digits or an impossible date (quote text)") from None

    def line(self, path: tuple[str, ...]) -> int:
        while path and path not in self.lines:
            path = path[:-1]
        return self.lines.get(path, 1)

    def error(self, path: tuple[str, ...], message: str, line: int | None = None) -> SuiteError:
        where = ".".join(path) if path else "(top level)"
        return SuiteError(f"{self.source}:{line or self.line(path)}: {where}: {message}")


def _mapping(doc: _Doc, value: Any, path: tuple[str, ...], allowed: dict[str, bool]) -> dict[str, Any]:
    """Check a mapping's keys: ``allowed`` maps each known key to whether it is required."""
    if not isinstance(value, dict):
        raise doc.error(path, f"expected a mapping, got {_kind(value)}")
    for key in value:
        if key not in allowed:
            raise doc.error(path + (key,), f"unknown key '{key}' (expected one of: {', '.join(sorted(allowed))})")
    for key, required in allowed.items():
        if required and key not in value:
            raise doc.error(path, f"missing required key '{key}'")
    return value


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "nothing"}.get(
        type(value), type(value).__name__
    )


def _typed(doc: _Doc, value: Any, path: tuple[str, ...], check: Callable[[Any], bool], want: str) -> Any:
    if not check(value):
        raise doc.error(path, f"expected {want}, got {_kind(value)} {value!r}")
    return value


def _int(doc: _Doc, value: Any, path: tuple[str, ...], minimum: int = 0) -> int:
    _typed(doc, value, path, lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number")
    if value < minimum:
        raise doc.error(path, f"must be at least {minimum}, got {value}")
    return int(value)


# A decimal number as YAML 1.2 writes it. PyYAML reads YAML 1.1, where a float needs a dot and a
# signed exponent: there `1e-4` and `1.0e308` are strings, and a task author meant numbers.
_DECIMAL = re.compile(r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?")


def _number(doc: _Doc, value: Any, path: tuple[str, ...], minimum: float = 0.0) -> float:
    """A finite number of at least ``minimum``: NaN would compare false with every bound and
    tolerance, an infinity pass everything."""
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        value = float(value)  # an exponent too large is inf, refused below
    _typed(doc, value, path, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number")
    try:
        number = float(value)
    except OverflowError:  # a YAML integer of hundreds of digits
        raise doc.error(path, "expected a finite number, got a whole number too large for one") from None
    if not math.isfinite(number):
        raise doc.error(path, f"expected a finite number, got {value}")
    if number < minimum:
        raise doc.error(path, f"must be at least {minimum}, got {value}")
    return number


def _limit(doc: _Doc, value: Any, path: tuple[str, ...], bound: Bound, whole: bool) -> float:
    """A limit within its documented bound (grader.bounds), a whole number where ``whole``."""
    number: float
    if whole:
        number = int(_typed(doc, value, path, lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"))
    else:
        number = _number(doc, value, path, -math.inf)
    problem = bound.problem(number)
    if problem:
        raise doc.error(path, problem)
    return number


def _str(doc: _Doc, value: Any, path: tuple[str, ...]) -> str:
    return str(_typed(doc, value, path, lambda v: isinstance(v, str) and v != "", "a non-empty string"))


def _case(doc: _Doc, name: str, raw: Any) -> Case:
    path = ("cases", name)
    raw = _mapping(doc, raw, path, {"seed": True, "shape": True, "magnitude": False, "mask": False})
    shape_raw = _mapping(doc, raw["shape"], path + ("shape",), {"batch": False, "tq": True, "tk": True, "dk": True, "dv": True})
    batch_raw = shape_raw.get("batch", [])
    if not isinstance(batch_raw, list):
        raise doc.error(path + ("shape", "batch"), f"expected a list of sizes, got {_kind(batch_raw)}")
    batch = tuple(_int(doc, b, path + ("shape", "batch", str(i)), 1) for i, b in enumerate(batch_raw))
    if len(batch) > 4:
        raise doc.error(path + ("shape", "batch"), "at most 4 batch axes are supported")
    sizes = {k: _int(doc, shape_raw[k], path + ("shape", k), 1) for k in ("tq", "tk", "dk", "dv")}
    shape = Shape(batch=batch, **sizes)
    total = math.prod(shape.batch + (max(shape.tq, shape.tk), max(shape.tk, shape.dk, shape.dv)))
    if total > 4_000_000 or max(sizes.values()) > 4096:
        raise doc.error(path + ("shape",), "case too large (keep each array under 4 million elements, sizes under 4096)")
    magnitude = _number(doc, raw.get("magnitude", 1.0), path + ("magnitude",), 1.0)
    if magnitude > 1024 or magnitude != 2.0 ** round(math.log2(magnitude)):
        # A power of two keeps the rounded inputs on a grid where every dot product stays exact.
        raise doc.error(path + ("magnitude",), f"expected a power of two from 1 to 1024, got {magnitude:g}")
    mask = _mask(doc, raw["mask"], path + ("mask",), shape) if "mask" in raw else None
    seed = _int(doc, raw["seed"], path + ("seed",))
    return Case(name=name, seed=seed, shape=shape, magnitude=magnitude, mask=mask)


def _mask(doc: _Doc, raw: Any, path: tuple[str, ...], shape: Shape) -> MaskSpec:
    """``causal`` or ``{padding: [key lengths, one per batch element]}``. No row may end up with
    every key masked: what attention means there is not defined, so it is never graded."""
    if raw == "causal":
        if shape.tk < 2:
            raise doc.error(path, "a causal mask with T_k = 1 masks nothing; use T_k >= 2")
        return MaskSpec("causal")
    if not isinstance(raw, dict):
        raise doc.error(path, f"expected 'causal' or a mapping {{padding: [lengths]}}, got {_kind(raw)} {raw!r}")
    raw = _mapping(doc, raw, path, {"padding": True})
    lengths_raw = raw["padding"]
    if not isinstance(lengths_raw, list) or not lengths_raw:
        raise doc.error(path + ("padding",), "expected a non-empty list of key lengths")
    lengths = tuple(_int(doc, n, path + ("padding", str(i)), 1) for i, n in enumerate(lengths_raw))
    want = shape.batch[0] if shape.batch else 1
    if len(lengths) != want:
        raise doc.error(path + ("padding",), f"expected {want} key length{'s' if want > 1 else ''} (one per batch element), got {len(lengths)}")
    for i, n in enumerate(lengths):
        if n > shape.tk:
            raise doc.error(path + ("padding", str(i)), f"key length {n} is more than T_k = {shape.tk}")
    if all(n == shape.tk for n in lengths):
        raise doc.error(path + ("padding",), f"every key length is T_k = {shape.tk}, so the mask masks nothing")
    return MaskSpec("padding", lengths)


def _check(doc: _Doc, index: int, raw: Any, cases: dict[str, Case], earlier: list[str]) -> CheckSpec:
    path = ("checks", str(index))
    raw = _mapping(doc, raw, path, {"id": True, "kind": False, "points": False, "case": False, "cases": False, "requires": False, "title": False, "enabled": False})
    check_id = _str(doc, raw["id"], path + ("id",))
    if check_id in earlier:
        raise doc.error(path + ("id",), f"check id '{check_id}' is used twice")
    kind = _str(doc, raw.get("kind", check_id), path + ("kind",))
    if kind not in CHECK_KINDS:
        raise doc.error(path + ("kind",), f"unknown check kind '{kind}' (expected one of: {', '.join(CHECK_KINDS)})")
    if "case" in raw and "cases" in raw:
        raise doc.error(path, "give either 'case' or 'cases', not both")
    names: list[str] = []
    if "case" in raw:
        names = [_str(doc, raw["case"], path + ("case",))]
    elif "cases" in raw:
        if not isinstance(raw["cases"], list) or not raw["cases"]:
            raise doc.error(path + ("cases",), "expected a non-empty list of case names")
        names = [_str(doc, c, path + ("cases", str(i))) for i, c in enumerate(raw["cases"])]
    for i, n in enumerate(names):
        if n not in cases:
            raise doc.error(path + ("cases", str(i)) if "cases" in raw else path + ("case",), f"unknown case '{n}'")
    if kind not in CASELESS_KINDS and not names:
        raise doc.error(path, f"a '{kind}' check needs 'case' or 'cases'")
    if kind == "mask":
        for n in names:
            if cases[n].mask is None:
                raise doc.error(path, f"case '{n}' has no mask; a mask check needs cases with `mask:`")
    elif kind != "gradients" and any(cases[n].mask is not None for n in names):
        masked = next(n for n in names if cases[n].mask is not None)
        raise doc.error(path, f"case '{masked}' has a mask; only a 'mask' check takes masked cases (and a 'gradients' check)")
    if kind == "batch":
        for n in names:
            if not cases[n].shape.batch:
                raise doc.error(path, f"case '{n}' has no batch axes; a batch check needs them")
    elif kind in ("shape", "weights", "outputs", "cross"):
        for n in names:
            if cases[n].shape.batch:
                raise doc.error(path, f"case '{n}' is batched; a '{kind}' check takes single-sequence cases")
    if kind == "cross":
        for n in names:
            s = cases[n].shape
            if s.tq == s.tk or s.dk == s.dv:
                raise doc.error(path, f"case '{n}' needs T_q != T_k and d_k != d_v for a cross-attention check")
    if kind == "fresh" and names:
        raise doc.error(path, "a 'fresh' check draws its own inputs at grading time; give it no cases")
    requires_raw = raw.get("requires", [])
    if not isinstance(requires_raw, list):
        raise doc.error(path + ("requires",), "expected a list of check ids")
    requires = tuple(_str(doc, r, path + ("requires", str(i))) for i, r in enumerate(requires_raw))
    for i, r in enumerate(requires):
        if r not in earlier:
            raise doc.error(path + ("requires", str(i)), f"'{r}' is not a check listed before '{check_id}'")
    title = raw.get("title", check_id)
    if "enabled" in raw:
        _typed(doc, raw["enabled"], path + ("enabled",), lambda v: isinstance(v, bool), "true or false")
    return CheckSpec(
        id=check_id,
        kind=kind,
        points=_number(doc, raw.get("points", 1), path + ("points",)),
        cases=tuple(names),
        requires=requires,
        title=_str(doc, title, path + ("title",)),
    )


def _invalid_yaml(source: str, exc: yaml.YAMLError) -> SuiteError:
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + 1 if mark is not None else 1
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return SuiteError(f"{source}:{line}: invalid YAML: {problem}")


def parse_suite(text: str, source: str, base: Path | None = None) -> Suite:
    """Parse and validate suite YAML. Raises SuiteError naming the line and key path."""
    try:
        loader = _LOADER(text)  # the pure-Python reader checks the characters here already
    except yaml.YAMLError as exc:
        raise _invalid_yaml(source, exc) from None
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            raise _invalid_yaml(source, exc) from None
        if node is None:
            raise SuiteError(f"{source}:1: the suite file is empty")
        doc = _Doc(source, loader)
        try:
            raw = doc.convert(node, ())
        except yaml.YAMLError as exc:
            raise SuiteError(f"{source}: invalid YAML: {str(exc).splitlines()[0]}") from None
    finally:
        loader.dispose()
    if isinstance(raw, dict) and "version" in raw:
        # The version first: a file written for another version is expected to have other keys.
        if _int(doc, raw["version"], ("version",), 1) != 1:
            raise doc.error(("version",), f"unsupported suite version {raw['version']} (this grader reads version 1)")
    top = _mapping(
        doc,
        raw,
        (),
        {
            "version": True, "name": True, "function": False, "cases": True, "checks": True, "tolerance": False, "limits": False,
            "severity": False, "references": False, "entry": False, "framework": False, "groups": False, "gradients": False,
        },
    )
    version = _int(doc, top["version"], ("version",), 1)
    if not isinstance(top["cases"], dict) or not top["cases"]:
        raise doc.error(("cases",), "expected a non-empty mapping of case names")
    cases = {name: _case(doc, name, value) for name, value in top["cases"].items()}
    if not isinstance(top["checks"], list) or not top["checks"]:
        raise doc.error(("checks",), "expected a non-empty list of checks")
    checks: list[CheckSpec] = []
    for i, raw_check in enumerate(top["checks"]):
        checks.append(_check(doc, i, raw_check, cases, [c.id for c in checks]))
    checks, disabled, groups_off = _enabled_checks(doc, top, checks)
    tol_raw = _mapping(doc, top.get("tolerance", {}), ("tolerance",), {"rtol": False, "atol": False})
    tolerance = Tolerance(
        rtol=_number(doc, tol_raw.get("rtol", 1e-4), ("tolerance", "rtol")),
        atol=_number(doc, tol_raw.get("atol", 1e-6), ("tolerance", "atol")),
    )
    lim_raw = _mapping(doc, top.get("limits", {}), ("limits",), {"timeout": False, "memory_mb": False, "output_kb": False})
    limits = Limits(
        timeout_s=_limit(doc, lim_raw.get("timeout", 10), ("limits", "timeout"), TIMEOUT_S, whole=False),
        memory_mb=int(_limit(doc, lim_raw.get("memory_mb", 1024), ("limits", "memory_mb"), MEMORY_MB, whole=True)),
        output_bytes=int(_limit(doc, lim_raw.get("output_kb", 64), ("limits", "output_kb"), OUTPUT_KB, whole=True)) * 1024,
    )
    sev_raw = _mapping(doc, top.get("severity", {}), ("severity",), {k: False for k in top.get("severity", {}) or {}})
    severity: dict[str, str] = {}
    for key, value in sev_raw.items():
        if key not in BY_NAME:
            raise doc.error(("severity", key), f"unknown diagnosis '{key}' (see `grade explain NAME`; known: {', '.join(BY_NAME)})")
        value = _str(doc, value, ("severity", key))
        if value not in SEVERITIES:
            raise doc.error(("severity", key), f"expected one of {', '.join(SEVERITIES)}, got '{value}'")
        severity[key] = value
    references = None
    if "references" in top:
        ref = Path(_str(doc, top["references"], ("references",)))
        references = ref if ref.is_absolute() or base is None else base / ref
    function = _str(doc, top.get("function", "attention"), ("function",))
    problem = function_name_problem(function)
    if problem:
        raise doc.error(("function",), problem)
    entry = None
    if "entry" in top:
        try:
            entry = parse_entry(_str(doc, top["entry"], ("entry",)))
        except ValueError as exc:
            raise doc.error(("entry",), str(exc)) from None
        if entry.function and "function" in top and entry.function != function:
            raise doc.error(("entry",), f"names function '{entry.function}' but `function:` says '{function}'")
        function = entry.function or function
    framework = _str(doc, top.get("framework", "auto"), ("framework",))
    if framework not in FRAMEWORK_SETTINGS:
        raise doc.error(("framework",), f"expected one of {', '.join(FRAMEWORK_SETTINGS)}, got '{framework}'")
    return Suite(
        name=_str(doc, top["name"], ("name",)),
        version=version,
        function=function,
        cases=cases,
        checks=tuple(checks),
        tolerance=tolerance,
        limits=limits,
        severity=severity,
        source=Path(source),
        references=references,
        entry=entry,
        framework=framework,
        disabled=disabled,
        groups_off=groups_off,
    )


def _switch(doc: _Doc, value: Any, path: tuple[str, ...]) -> bool:
    """``on`` / ``off`` (YAML reads both as booleans, as it does true / false), or the quoted words."""
    if isinstance(value, str) and value in ("on", "off"):
        return value == "on"
    return bool(_typed(doc, value, path, lambda x: isinstance(x, bool), "on or off"))


def _enabled_checks(doc: _Doc, top: dict[str, Any], checks: list[CheckSpec]) -> tuple[list[CheckSpec], tuple[str, ...], tuple[str, ...]]:
    """Drop the checks whose group is off (``groups: {batch: false}``), the gradient checks when
    ``gradients: off``, and those that say ``enabled: false``. A requirement on a dropped check is
    dropped with it: what does not run cannot block anything."""
    groups_raw = _mapping(doc, top.get("groups", {}), ("groups",), {g: False for g in GROUPS})
    groups = {g: _typed(doc, v, ("groups", g), lambda x: isinstance(x, bool), "true or false") for g, v in groups_raw.items()}
    gradients = _switch(doc, top.get("gradients", True), ("gradients",))
    off = set()
    for i, spec in enumerate(checks):
        own = top["checks"][i].get("enabled", True)
        if not own or not groups.get(GROUP_OF_KIND.get(spec.kind, ""), True) or spec.kind == "gradients" and not gradients:
            off.add(spec.id)
    kept = [replace(c, requires=tuple(r for r in c.requires if r not in off)) for c in checks if c.id not in off]
    if not kept:
        raise doc.error(("checks",), "every check is turned off; at least one must run")
    return kept, tuple(c.id for c in checks if c.id in off), tuple(g for g, on in groups.items() if not on)


def load_suite(path: Path) -> Suite:
    """Read and validate a suite file. Raises SuiteError (one line, with file and line)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SuiteError(f"{path}: suite file not found") from None
    except IsADirectoryError:
        raise SuiteError(f"{path}: is a folder, not a suite file") from None
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read suite file: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SuiteError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_suite(text, str(path), base=path.parent)
