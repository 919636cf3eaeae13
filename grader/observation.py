"""What the worker saw, as validated plain data: the input of every judgement.

The worker's messages are untrusted (the submission shares its process and may have written to
the result pipe itself), so each field is checked here before anything else reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from grader.sandbox.isolation import Layer

WorkerStatus = Literal["completed", "timeout", "memory", "crashed", "protocol-error"]


class MalformedMessage(ValueError):
    pass


@dataclass(frozen=True)
class ErrorInfo:
    """An exception the submission raised: type, message and where in its own code."""

    type: str
    message: str
    line: int | None = None
    file: str | None = None
    frames: tuple[dict[str, Any], ...] = ()
    cell: int | None = None  # In a notebook, the cell that holds ``line`` (from 1)
    code: str | None = None  # ``line`` as the worker read it, through the sandbox
    elsewhere: bool = False  # ``file`` is another of the candidate's files than the graded one

    @property
    def where(self) -> str:
        """'line 7'; 'src/pkg/ops.py, line 5' in another of the candidate's files; 'cell 3,
        line 2' in a notebook; '' when the line is unknown."""
        if self.line is None:
            return ""
        if self.cell is not None:
            return f"cell {self.cell}, line {self.line}"
        return f"{self.file}, line {self.line}" if self.elsewhere and self.file else f"line {self.line}"

    @property
    def short(self) -> str:
        """Type and message on one line, clipped: numpy's shape errors run long; the full text
        stays in ``message``."""
        text = " ".join(f"{self.type}: {self.message}".split()) if self.message else self.type
        return text if len(text) <= 140 else text[:137] + "..."


@dataclass(frozen=True)
class Value:
    """A returned value: its type name, and its array when it was array-like."""

    type: str
    array: np.ndarray | None = None
    items: tuple[Value, ...] | None = None  # for tuples and lists
    list_array: np.ndarray | None = None  # a list that converts to a numeric array
    repr: str = ""
    # For a returned (output, weights) pair, ``array`` is the output and this the weights
    weights: np.ndarray | None = None

    @property
    def is_array(self) -> bool:
        return self.array is not None


GradientStatus = Literal["computed", "no-gradient", "failed", "no-output"]
GRADIENT_STATUSES: tuple[GradientStatus, ...] = ("computed", "no-gradient", "failed", "no-output")
GRADIENT_INPUTS = ("Q", "K", "V")


@dataclass(frozen=True)
class Gradients:
    """What the worker's autograd gave for a gradient probe (see grader.sandbox.gradients):
    ``computed`` (``arrays`` by input, the inputs that got ``None`` in ``none``), ``no-gradient``
    (the output has no graph: every input in ``none``), ``failed`` (the backward raised: ``error``)
    or ``no-output`` (nothing of the output's shape to differentiate)."""

    status: GradientStatus
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # "Q", "K", "V" -> the gradient
    none: tuple[str, ...] = ()
    reason: str = ""
    error: ErrorInfo | None = None
    item: int | None = None  # the item of a returned tuple that was differentiated
    duration_s: float = 0.0


@dataclass(frozen=True)
class Observation:
    """What one call of the submission's function did: returned a value or raised."""

    probe: str
    call: int
    status: Literal["returned", "raised"]
    duration_s: float
    value: Value | None = None
    error: ErrorInfo | None = None
    inputs_after: dict[str, np.ndarray] = field(default_factory=dict)
    gradients: Gradients | None = None  # for a gradient probe that returned


@dataclass(frozen=True)
class LoadInfo:
    """Whether the worker imported the file and found a callable function."""

    ok: bool
    reason: str = ""  # "load-error" or "function-missing" when not ok
    error: ErrorInfo | None = None
    callable_type: str = ""
    signature: str | None = None
    accepts_three: bool = True
    signature_error: str = ""
    available: tuple[str, ...] = ()


@dataclass(frozen=True)
class CapturedOutput:
    """What the submission printed: the start of it, and how much there was."""

    text: str
    total_bytes: int
    kept_bytes: int

    @property
    def truncated_bytes(self) -> int:
        return self.total_bytes - self.kept_bytes


@dataclass(frozen=True)
class WorkerRun:
    """Everything the worker reported about one submission, and how it ended."""

    status: WorkerStatus
    load: LoadInfo | None
    observations: dict[tuple[str, int], Observation]
    output: CapturedOutput
    duration_s: float
    exit_code: int | None = None
    signal: int | None = None
    max_rss_kb: int = 0
    detail: str = ""  # why the run ended the way it did, for timeouts and crashes
    last_probe: str | None = None  # the probe being run when the worker stopped, if any
    sandbox: tuple[Layer, ...] = ()  # the isolation layers the worker reported, active or not

    def get(self, probe: str, call: int = 0) -> Observation | None:
        return self.observations.get((probe, call))


def _str(meta: dict[str, Any], key: str, default: str | None = None, limit: int = 4000) -> str:
    value = meta.get(key, default)
    if not isinstance(value, str):
        raise MalformedMessage(f"field {key!r} is not text")
    return value[:limit]


def _opt_int(value: Any) -> int | None:
    return value if type(value) is int else None


def parse_error(meta: Any) -> ErrorInfo:
    if not isinstance(meta, dict):
        raise MalformedMessage("error is not a mapping")
    frames = meta.get("frames", [])
    if not isinstance(frames, list):
        frames = []
    clean = tuple(
        {"file": str(f.get("file"))[:300], "line": _opt_int(f.get("line")), "function": str(f.get("function"))[:200], "code": str(f.get("code"))[:300]}
        for f in frames[:10]
        if isinstance(f, dict)
    )
    file = meta.get("file")
    return ErrorInfo(
        type=_str(meta, "type", "Exception", 200),
        message=_str(meta, "message", ""),
        line=_opt_int(meta.get("line")),
        file=file[:300] if isinstance(file, str) else None,
        frames=clean,
        code=code[:300] if isinstance(code := meta.get("code"), str) else None,
        elsewhere=meta.get("elsewhere") is True,
    )


def parse_value(meta: Any, arrays: dict[str, np.ndarray], depth: int = 0) -> Value:
    if not isinstance(meta, dict) or depth > 1:
        raise MalformedMessage("value is not a mapping")
    array = None
    if "array" in meta:
        name = meta["array"]
        if not isinstance(name, str) or name not in arrays:
            raise MalformedMessage("value names a missing array")
        array = arrays[name]
    items = None
    if isinstance(meta.get("items"), list):
        items = tuple(parse_value(item, arrays, depth + 1) for item in meta["items"][:4])
    list_array = None
    if isinstance(meta.get("as_array"), str) and meta["as_array"] in arrays:
        list_array = arrays[meta["as_array"]]
    return Value(type=_str(meta, "type", "?", 200), array=array, items=items, list_array=list_array, repr=str(meta.get("repr", ""))[:300])


def parse_gradients(meta: Any, arrays: dict[str, np.ndarray]) -> Gradients:
    if not isinstance(meta, dict) or meta.get("status") not in GRADIENT_STATUSES:
        raise MalformedMessage("bad gradients field")
    none = meta.get("none", [])
    if not isinstance(none, list) or any(n not in GRADIENT_INPUTS for n in none):
        raise MalformedMessage("bad list of inputs without gradient")
    item, duration = meta.get("item"), meta.get("duration", 0.0)
    return Gradients(
        status=meta["status"],
        arrays={label: arrays[f"grad.{label}"] for label in GRADIENT_INPUTS if f"grad.{label}" in arrays and label not in none},
        none=tuple(dict.fromkeys(none)),
        reason=str(meta.get("reason", ""))[:300],
        error=parse_error(meta["error"]) if "error" in meta else None,
        item=item if type(item) is int and 0 <= item < 4 else None,
        duration_s=float(duration) if isinstance(duration, (int, float)) else 0.0,
    )


def parse_result(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> Observation:
    probe = _str(meta, "probe", None, 200)
    call = meta.get("call")
    if type(call) is not int or call < 0:
        raise MalformedMessage("bad call index")
    status = meta.get("status")
    if status not in ("returned", "raised"):
        raise MalformedMessage("bad status")
    duration = meta.get("duration", 0.0)
    if not isinstance(duration, (int, float)):
        duration = 0.0
    after = {label: arrays[f"after.{label}"] for label in ("Q", "K", "V") if f"after.{label}" in arrays}
    if status == "returned":
        gradients = parse_gradients(meta["gradients"], arrays) if "gradients" in meta else None
        return Observation(probe, call, "returned", float(duration), value=parse_value(meta.get("value"), arrays), inputs_after=after, gradients=gradients)
    return Observation(probe, call, "raised", float(duration), error=parse_error(meta.get("error")), inputs_after=after)


def parse_load(meta: dict[str, Any]) -> LoadInfo:
    if meta.get("ok") is True:
        signature = meta.get("signature")
        return LoadInfo(
            ok=True,
            callable_type=_str(meta, "callable", "?", 200),
            signature=signature[:300] if isinstance(signature, str) else None,
            accepts_three=meta.get("accepts_three") is not False,
            signature_error=str(meta.get("signature_error", ""))[:300],
        )
    reason = meta.get("reason")
    if reason not in ("load-error", "function-missing"):
        raise MalformedMessage("bad load reason")
    available = meta.get("available", [])
    return LoadInfo(
        ok=False,
        reason=reason,
        error=parse_error(meta["error"]) if "error" in meta else None,
        available=tuple(str(a)[:100] for a in available[:20]) if isinstance(available, list) else (),
    )


def parse_sandbox(meta: dict[str, Any]) -> tuple[Layer, ...]:
    """The worker's report of its isolation layers: ``[[name, active, detail], ...]``."""
    layers = meta.get("layers")
    if not isinstance(layers, list) or len(layers) > 40:
        raise MalformedMessage("bad sandbox layer list")
    parsed = []
    for entry in layers:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str) and type(entry[1]) is bool and isinstance(entry[2], str)):
            raise MalformedMessage("bad sandbox layer")
        parsed.append(Layer(entry[0][:60], entry[1], entry[2][:1000]))
    return tuple(parsed)
