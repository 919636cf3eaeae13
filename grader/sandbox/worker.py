"""The worker: the only code that runs next to a submission.

It reads one request (the submission path, the function name and a list of probes), loads the
submission, calls the function on every probe and streams one observation per call back to the
grader, then a final "done". It knows nothing of the expected answers or of the checks: it only
records what happened, as plain data.

Started (see runner.py) as ``python -I -c BOOT PACKAGE_ROOT REQUEST_FD RESULT_FD`` with stdin on /dev/null,
stdout and stderr on a capped pipe the grader reads, in a fresh empty working folder.
"""

from __future__ import annotations

import inspect
import os
import resource
import sys
import time
import traceback
import types
from typing import Any, Callable

import numpy as np

from grader.sandbox.forms import MASK_NAMES, call_arguments, import_submission, search_path  # issue 6
from grader.sandbox.protocol import decode, encode

MAX_TEXT = 2000
MAX_RETURN_ELEMENTS = 20_000_000
MAX_TUPLE_ITEMS = 4


def safe_text(obj: Any, limit: int = MAX_TEXT) -> str:
    """str() of a submission's object that cannot raise and cannot be huge."""
    try:
        text = str(obj)
    except BaseException:  # noqa: BLE001 - a hostile __str__ may raise anything
        try:
            text = f"<unprintable {type(obj).__name__}>"
        except BaseException:  # noqa: BLE001
            text = "<unprintable>"
    if not isinstance(text, str):
        text = "<unprintable>"
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"


def type_name(obj: Any) -> str:
    cls = type(obj)
    module = getattr(cls, "__module__", "") or ""
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module == "builtins" else f"{module}.{name}"


class Channel:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, meta: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> None:
        data = memoryview(encode(meta, arrays))
        while data:
            written = os.write(self.fd, data)
            data = data[written:]


def read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def describe_error(exc: BaseException, submission_dir: str) -> dict[str, Any]:
    """Type, message and the deepest line of the submission's own code that was running."""
    frames = []
    lineno = None
    filename = None
    try:
        for frame in traceback.extract_tb(exc.__traceback__):
            inside = os.path.abspath(frame.filename).startswith(submission_dir + os.sep)
            if inside:
                lineno, filename = frame.lineno, os.path.relpath(frame.filename, submission_dir)
                frames.append({"file": filename, "line": frame.lineno, "function": frame.name, "code": safe_text(frame.line or "", 300)})
    except BaseException:  # noqa: BLE001
        pass
    if isinstance(exc, SyntaxError) and exc.filename:
        lineno, filename = exc.lineno, os.path.basename(exc.filename)
    return {
        "type": type_name(exc),
        "message": safe_text(exc),
        "line": lineno,
        "file": filename,
        "frames": frames[-10:],
    }


def to_array(value: Any) -> np.ndarray | None:
    """A plain numeric ndarray copy of an array-like return value, or None."""
    module = type(value).__module__ or ""
    try:
        if isinstance(value, np.ndarray):
            array = np.array(value, copy=True, subok=False)
        elif module.startswith("torch") and hasattr(value, "detach"):
            array = np.array(value.detach().cpu().numpy(), copy=True)
        elif module.startswith(("jax", "jaxlib")):
            array = np.array(value, copy=True)
        else:
            return None
    except BaseException:  # noqa: BLE001
        return None
    if array.dtype.kind not in "fiucb" or array.size > MAX_RETURN_ELEMENTS:
        return None
    return array


def describe_value(value: Any, prefix: str, depth: int = 0) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    meta: dict[str, Any] = {"type": type_name(value)}
    arrays: dict[str, np.ndarray] = {}
    array = to_array(value)
    if array is not None:
        meta["array"] = prefix
        arrays[prefix] = array
    elif isinstance(value, (tuple, list)) and depth == 0:
        items = []
        for i, item in enumerate(value[:MAX_TUPLE_ITEMS]):
            item_meta, item_arrays = describe_value(item, f"{prefix}.{i}", depth + 1)
            items.append(item_meta)
            arrays.update(item_arrays)
        meta["items"] = items
        meta["length"] = len(value)
        if isinstance(value, list):
            try:
                converted = np.asarray(value, dtype=np.float64)
                if converted.size <= MAX_RETURN_ELEMENTS:
                    meta["as_array"] = f"{prefix}.list"
                    arrays[f"{prefix}.list"] = converted
            except BaseException:  # noqa: BLE001
                pass
    else:
        if isinstance(value, np.ndarray):
            meta["dtype"] = safe_text(value.dtype, 100)
            meta["shape"] = [int(n) for n in value.shape]
        meta["repr"] = safe_text(value, 300)
    return meta, arrays


def load_function(path: str, name: str, plan: dict[str, Any] | None = None) -> tuple[Callable[..., Any] | None, dict[str, Any]]:
    plan = dict(plan or {})
    submission_dir = plan.get("root") or os.path.dirname(os.path.abspath(path))
    for folder in reversed(search_path(path, plan)):
        sys.path.insert(0, folder)
    try:
        module = import_submission(path, plan)
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are load errors too
        return None, {"ok": False, "reason": "load-error", "error": describe_error(exc, submission_dir)}
    fn = getattr(module, name, None)
    if fn is None or not callable(fn):
        available = sorted(
            n for n, v in vars(module).items()
            if callable(v) and not n.startswith("_") and not isinstance(v, types.ModuleType) and getattr(v, "__module__", None) == module.__name__
        )
        return None, {"ok": False, "reason": "function-missing", "found": fn is not None, "available": available[:20]}
    info: dict[str, Any] = {"ok": True, "callable": type_name(fn)}
    try:
        signature = inspect.signature(fn)
        info["signature"] = safe_text(signature, 300)
        keyword = next((p.name for p in signature.parameters.values() if p.name in MASK_NAMES and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)), None)
        if keyword:
            info["mask_keyword"] = keyword
        try:
            signature.bind(0, 0, 0)
            info["accepts_three"] = True
        except TypeError as exc:
            # A required mask parameter (issue 6) receives None where the task has no mask.
            try:
                signature.bind(0, 0, 0, **{keyword: None}) if keyword else signature.bind(0, 0, 0, None)
                info["accepts_three"] = True
                info["mask_required"] = True
            except TypeError:
                info["accepts_three"] = False
                info["signature_error"] = safe_text(exc, 300)
    except (TypeError, ValueError):
        info["signature"] = None
        info["accepts_three"] = True  # builtins and C callables: find out by calling
    return fn, info


def apply_limits(limits: dict[str, Any]) -> None:
    """soft = hard so that the submission cannot raise them again."""
    pairs = [
        (resource.RLIMIT_AS, limits.get("memory_bytes")),
        (resource.RLIMIT_CPU, limits.get("cpu_seconds")),
        (resource.RLIMIT_FSIZE, limits.get("file_bytes")),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in pairs:
        if value is None:
            continue
        try:
            resource.setrlimit(which, (int(value), int(value)))
        except (ValueError, OSError):
            pass


def run_probes(fn: Callable[..., Any], probes: list[dict[str, Any]], inputs: dict[str, np.ndarray], channel: Channel, submission_dir: str, info: dict[str, Any] | None = None, adapt: Callable[[Any], Any] | None = None) -> None:
    info = info or {}
    adapt = adapt or (lambda array: array)  # issue 6: tensors for torch / jax submissions
    for probe in probes:
        name = probe["name"]
        for call in range(int(probe.get("repeat", 1))):
            Q = inputs[f"{name}.Q"].copy()
            K = inputs[f"{name}.K"].copy()
            V = inputs[f"{name}.V"].copy()
            mask = inputs[f"{name}.mask"].copy() if f"{name}.mask" in inputs else None
            args, kwargs = call_arguments(info, adapt(Q), adapt(K), adapt(V), None if mask is None else adapt(mask), mask is not None)
            meta: dict[str, Any] = {"kind": "result", "probe": name, "call": call}
            arrays: dict[str, np.ndarray] = {}
            started = time.perf_counter()
            try:
                value = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - the submission may raise anything
                meta["duration"] = time.perf_counter() - started
                meta["status"] = "raised"
                meta["error"] = describe_error(exc, submission_dir)
                if isinstance(exc, SystemExit):
                    meta["error"]["message"] = f"SystemExit({safe_text(exc.code, 100)})"
            else:
                meta["duration"] = time.perf_counter() - started
                meta["status"] = "returned"
                meta["value"], arrays = describe_value(value, "out")
            if probe.get("return_inputs"):
                for label, array in (("Q", Q), ("K", K), ("V", V)):
                    plain = to_array(array)
                    if plain is not None:
                        arrays[f"after.{label}"] = plain
            channel.send(meta, arrays)


def main(argv: list[str]) -> int:
    request_fd, result_fd = int(argv[0]), int(argv[1])
    meta, inputs = decode(read_all(request_fd)[4:])
    os.close(request_fd)
    channel = Channel(result_fd)
    limits = meta.get("limits", {})
    adapt = None
    framework = meta.get("framework") or "numpy"
    if framework != "numpy":
        # issue 6: import torch / jax (installed code, not the candidate's) before the limits, which
        # then count from here; the grader starts the submission's clock at "ready".
        from grader.frameworks import relative_limits, worker_adapter

        try:
            adapt = worker_adapter(framework)
        except BaseException as exc:  # noqa: BLE001 - a broken install is this submission's load error
            channel.send({"kind": "loaded", "ok": False, "reason": "load-error", "error": describe_error(exc, os.devnull)})
            channel.send({"kind": "done"})
            return 0
        limits = relative_limits(limits)
        channel.send({"kind": "ready"})
    apply_limits(limits)
    path = meta["submission"]
    plan = meta.get("plan") or {}
    submission_dir = plan.get("root") or os.path.dirname(os.path.abspath(path))
    fn, info = load_function(path, meta["function"], plan)
    channel.send({"kind": "loaded", **info})
    if fn is not None:
        run_probes(fn, meta["probes"], inputs, channel, submission_dir, info, adapt)
    channel.send({"kind": "done"})
    return 0


def entry(argv: list[str]) -> None:
    # Flush what the submission printed before leaving, and leave without running atexit hooks
    # the submission may have registered.
    code = main(argv)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        pass
    os._exit(code)
