"""The worker: the only code that runs next to a submission.

It reads one request (the submission path, the function name and a list of probes), loads the
submission, calls the function on every probe and streams one observation per call back to the
grader, then a final "done". It knows nothing of the expected answers or of the checks: it only
records what happened, as plain data.

Started (see runner.py) as ``python -I -c BOOT PACKAGE_ROOT REQUEST_FD RESULT_FD`` with stdin on /dev/null,
stdout and stderr on a capped pipe the grader reads, in a fresh empty working folder. ``entry``
is the one way in, whoever starts the process: it forks the worker proper into a PID namespace
of its own (see isolation.run_in_pid_namespace) and relays how it ended, or, when the fork
server already forked it as PID 1 of a new namespace, runs the worker proper itself. The worker
proper reads the request, applies the isolation layers the request names (readable and hidden
paths, limits; see policy.py), reports them in a "sandbox" message, and only then loads the
submission.

Everything the worker needs is imported at the top of this module, before isolation: afterwards
the grader's package folder is hidden and sealed (no further ``grader.*`` import works), and a
folder above a hidden path can no longer be listed. The worker never imports the reference
implementation, the references or the checks, so they are not in its memory either.
"""

from __future__ import annotations

import inspect
import os
import sys
import time
import traceback
import types
from typing import Any, Callable

# First: the grader's import path, in the grader's order, where numpy, torch or jax may be (-I left
# PYTHONPATH and the user site out). BOOT set it already (env.IMPORT_BOOT); see paths.adopt_import_path.
import grader.sandbox.isolation.paths  # noqa: F401  # isort: skip
import numpy as np

from grader.frameworks import compile_eagerly, relative_limits, worker_adapter
from grader.sandbox.forms import MASK_NAMES, call_arguments, import_submission, search_path
from grader.sandbox.gradients import framework_of, with_gradients
from grader.sandbox.isolation import LAYER_NAMES, Layer, Policy, apply_isolation, forked_as_namespace_init, missing_guarantees, relay_exit, run_as_namespace_init, run_in_pid_namespace
from grader.sandbox.compile_cache import open_compile_cache
from grader.sandbox.protocol import decode, encode

MAX_TEXT = 2000
MAX_RETURN_ELEMENTS = 20_000_000
MAX_TUPLE_ITEMS = 4
# The graded file, once main() knows it: an exception raised in another of the candidate's
# files (a helper module) says which (describe_error).
graded_file: str | None = None


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


def read_request(fd: int) -> memoryview:
    """The request frame's body, read into one buffer of its size (its length comes first): no
    copy of the probes' arrays is made on the way, and every page made costs this fresh process
    a fault of its own."""
    head = _read_exactly(fd, memoryview(bytearray(4)))
    body = memoryview(bytearray(int.from_bytes(head, "little")))
    return _read_exactly(fd, body)


def _read_exactly(fd: int, buffer: memoryview) -> memoryview:
    done = 0
    while done < len(buffer):
        got = os.readv(fd, [buffer[done:]])
        if got == 0:
            raise EOFError(f"the request ended after {done} of {len(buffer)} bytes")
        done += got
    return buffer


def describe_error(exc: BaseException, submission_dir: str) -> dict[str, Any]:
    """Type, message and the deepest line of the submission's own code that was running."""
    frames = []
    lineno = None
    filename = None
    code = None
    elsewhere = False
    try:
        for frame in traceback.extract_tb(exc.__traceback__):
            inside = os.path.abspath(frame.filename).startswith(submission_dir + os.sep)
            if inside:
                lineno, filename = frame.lineno, os.path.relpath(frame.filename, submission_dir)
                code = safe_text(frame.line or "", 300)
                elsewhere = graded_file is not None and os.path.abspath(frame.filename) != graded_file
                frames.append({"file": filename, "line": frame.lineno, "function": frame.name, "code": code})
    except BaseException:  # noqa: BLE001
        pass
    try:
        if isinstance(exc, SyntaxError) and exc.filename:
            inside = os.path.abspath(exc.filename).startswith(submission_dir + os.sep)
            lineno, filename = exc.lineno, os.path.relpath(exc.filename, submission_dir) if inside else os.path.basename(exc.filename)
            code = safe_text(exc.text.strip() if isinstance(exc.text, str) else "", 300)
            elsewhere = graded_file is not None and os.path.abspath(exc.filename) != graded_file
    except BaseException:  # noqa: BLE001 - a SyntaxError subclass of the submission's may raise
        pass
    # ``code`` is the line as this worker could read it (through the sandbox): the grader shows
    # it for a file other than the graded one and never opens that file itself.
    return {
        "type": type_name(exc),
        "message": safe_text(exc),
        "line": lineno,
        "file": filename,
        "code": code,
        "elsewhere": elsewhere,
        "frames": frames[-10:],
    }


def to_array(value: Any) -> np.ndarray | None:
    """A plain numeric ndarray copy of an array-like return value, or None."""
    module = type(value).__module__ or ""
    try:
        if isinstance(value, np.ndarray):
            # Read through ndarray's own descriptors: a subclass may override .size or .dtype
            # to hide a huge view (np.broadcast_to) that the copy below would materialise.
            if np.ndarray.size.__get__(value) > MAX_RETURN_ELEMENTS or np.ndarray.dtype.__get__(value).kind not in "fiucb":
                return None
            array = np.array(value, copy=True, subok=False)
        elif module.startswith("torch") and hasattr(value, "detach"):
            tensor = value.detach().cpu()
            # NumPy has no bfloat16: widened to float32, which holds every bfloat16 value
            # exactly, so the grader sees the values on the bfloat16 grid (reduced-precision).
            array = np.array((tensor.float() if str(tensor.dtype) == "torch.bfloat16" else tensor).numpy(), copy=True)
        elif module.startswith(("jax", "jaxlib")):
            array = np.array(value, copy=True)
            if array.dtype.name == "bfloat16":  # ml_dtypes' type, which the protocol cannot carry
                array = array.astype(np.float32)
        else:
            return None
    except BaseException:  # noqa: BLE001
        return None
    if array.dtype.kind not in "fiucb" or array.size > MAX_RETURN_ELEMENTS:
        return None
    return _sendable(array)


def _sendable(array: np.ndarray) -> np.ndarray:
    """In a dtype the protocol carries (it makes the byte order little-endian itself): extended
    precision (longdouble, float128) narrowed to float64, where the grader compares anyway, so a
    correct submission that computes in more precision than asked does not fail as a malformed
    result."""
    if array.dtype.kind == "f" and array.dtype.itemsize > 8:
        return array.astype(np.float64)
    if array.dtype.kind == "c" and array.dtype.itemsize > 16:
        return array.astype(np.complex128)
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
            # A required mask parameter receives None where the task has no mask.
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


def isolate(meta: dict[str, Any], with_limits: bool = True, only_limits: bool = False) -> list[Layer]:
    """Apply the sandbox the request describes (paths and limits come from the grader; nothing
    here looks at the submission). The limits are set by the rlimits layer, soft = hard:
    ``with_limits=False`` leaves them out, ``only_limits=True`` applies them alone (later)."""
    box, limits = meta["sandbox"], meta["limits"]
    policy = Policy(
        workdir=str(box["workdir"]),
        readable=tuple(str(p) for p in box["readable"]),
        hidden=tuple(str(p) for p in box["hidden"]),
        cpu_seconds=int(limits["cpu_seconds"]),
        memory_bytes=int(limits["memory_bytes"]),
        file_bytes=int(limits["file_bytes"]),
        open_files=int(box["open_files"]),
        processes=int(box["processes"]),
        masked=tuple(str(p) for p in box.get("masked", ())),
    )
    only = set(box["layers"]) if box.get("layers") is not None else None
    if only_limits:
        only = {"rlimits"} & only if only is not None else {"rlimits"}
    elif not with_limits:
        only = (only if only is not None else set(LAYER_NAMES)) - {"rlimits"}
    return apply_isolation(policy, only=only)


class _SealedGrader:
    """First on sys.meta_path once the package is sealed: ``grader`` and ``grader.*`` are never
    found again, even after the submission drops them from sys.modules. sys.path stays the
    grader's (the folder holding the package may be site-packages, the user site or a --target
    folder, whose other packages the submission may import)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == "grader" or fullname.startswith("grader."):
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def seal_grader_package() -> None:
    """Keep the submission away from the grader's code: the modules the worker runs on stay
    loaded, but an empty __path__ makes every further ``grader.*`` import fail at once, and a
    finder first on sys.meta_path refuses the package by name (even where no filesystem layer
    hides the folder). BOOT never put the package's folder on sys.path (env.IMPORT_BOOT)."""
    for name, module in list(sys.modules.items()):
        if (name == "grader" or name.startswith("grader.")) and hasattr(module, "__path__"):
            module.__path__ = []
    if not any(isinstance(finder, _SealedGrader) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SealedGrader())


def _raised(meta: dict[str, Any], exc: BaseException, submission_dir: str) -> None:
    meta["status"] = "raised"
    meta["error"] = describe_error(exc, submission_dir)
    if isinstance(exc, SystemExit):
        meta["error"]["message"] = f"SystemExit({safe_text(exc.code, 100)})"


def run_probes(fn: Callable[..., Any], probes: list[dict[str, Any]], inputs: dict[str, np.ndarray], channel: Channel, submission_dir: str, info: dict[str, Any] | None = None, adapt: Callable[[Any], Any] | None = None) -> None:
    info = info or {}
    adapt = adapt or (lambda array: array)  # Tensors for torch / jax submissions
    # Which autograd the arrays handed to the function have: none for NumPy arrays.
    autograd = framework_of(adapt(np.zeros(1))) if any(p.get("gradients") for p in probes) else None
    for probe in probes:
        name = probe["name"]
        if probe.get("gradients"):
            if autograd is not None:  # a NumPy worker has no gradients to observe
                run_gradient_probe(autograd, fn, name, inputs, channel, submission_dir, info, adapt)
            continue
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
                _raised(meta, exc, submission_dir)
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


def run_gradient_probe(framework: str, fn: Callable[..., Any], name: str, inputs: dict[str, np.ndarray], channel: Channel, submission_dir: str, info: dict[str, Any], adapt: Callable[[Any], Any]) -> None:
    """One call with inputs that require gradients, and the gradients of sum(output * G) with
    respect to Q, K and V (see gradients.py), sent like a call's result with a ``gradients``
    field and the arrays ``grad.Q``, ``grad.K``, ``grad.V``."""
    Q, K, V, G = (inputs[f"{name}.{label}"].copy() for label in ("Q", "K", "V", "G"))
    mask = adapt(inputs[f"{name}.mask"].copy()) if f"{name}.mask" in inputs else None

    def call(q: Any, k: Any, v: Any) -> Any:
        args, kwargs = call_arguments(info, q, k, v, mask, mask is not None)
        return fn(*args, **kwargs)

    meta: dict[str, Any] = {"kind": "result", "probe": name, "call": 0}
    arrays: dict[str, np.ndarray] = {}
    started = time.perf_counter()
    try:
        value, meta["gradients"], arrays = with_gradients(framework, call, Q, K, V, G, to_array, lambda exc: describe_error(exc, submission_dir))
    except BaseException as exc:  # noqa: BLE001 - the forward call may raise anything
        meta["duration"] = time.perf_counter() - started
        _raised(meta, exc, submission_dir)
    else:
        meta["duration"] = time.perf_counter() - started
        meta["status"] = "returned"
        meta["value"], values = describe_value(value, "out")
        arrays.update(values)
    channel.send(meta, arrays)


def main(argv: list[str]) -> int:
    request_fd, result_fd = int(argv[0]), int(argv[1])
    meta, inputs = decode(read_request(request_fd), copy=False)  # the inputs are copied for each call
    os.close(request_fd)
    channel = Channel(result_fd)
    # -I ignores PYTHONDONTWRITEBYTECODE: say it here, or importing the submission would leave a
    # __pycache__ folder in the candidate's folder (or fail to, when it is read-only).
    sys.dont_write_bytecode = True
    framework = meta.get("framework") or "numpy"
    # A framework submission gets its resource limits after torch / jax is ready (below); every
    # other layer needs a single-threaded process, so it comes first, before the framework
    # starts its threads. The same order whether the framework was imported by the fork server
    # this worker was forked from (which had one thread at the fork) or is imported here.
    layers = isolate(meta, with_limits=framework == "numpy")
    missing = [g for g in missing_guarantees(layers) if g in meta["sandbox"].get("require", [])]
    adapt = None
    failure: BaseException | None = None
    if framework != "numpy" and not missing:
        # Make torch / jax ready (installed code, not the candidate's: imported here, or only
        # started when the fork server imported it) before the limits, which then count from
        # here, the framework's address space added; the grader starts the submission's clock
        # at "ready".
        try:
            adapt = worker_adapter(framework)
        except BaseException as exc:  # noqa: BLE001 - a broken install is this submission's load error
            failure = exc
        else:
            cache = open_compile_cache(meta["sandbox"].get("compiled"), layers) if framework == "jax" else None
            layers += [cache] if cache is not None else []
        limited = isolate({**meta, "limits": relative_limits(meta["limits"])}, only_limits=True)
        layers = [next((l for l in limited if l.name == "rlimits"), layer) if layer.name == "rlimits" else layer for layer in layers]
    # Sent before the submission runs, so the first sandbox message is always the worker's own.
    channel.send({"kind": "sandbox", "layers": [[layer.name, layer.active, layer.detail] for layer in layers], "missing": missing})
    if missing:
        channel.send({"kind": "done"})  # strict mode: the submission is never loaded
        return 0
    if failure is not None:
        channel.send({"kind": "loaded", "ok": False, "reason": "load-error", "error": describe_error(failure, os.devnull)})
        channel.send({"kind": "done"})
        return 0
    if framework != "numpy":
        channel.send({"kind": "ready"})
    seal_grader_package()
    path = meta["submission"]
    global graded_file
    graded_file = os.path.abspath(path)
    plan = meta.get("plan") or {}
    submission_dir = plan.get("root") or os.path.dirname(os.path.abspath(path))
    fn, info = load_function(path, meta["function"], plan)
    channel.send({"kind": "loaded", **info})
    if fn is not None:
        compile_eagerly(framework)
        run_probes(fn, meta["probes"], inputs, channel, submission_dir, info, adapt)
    channel.send({"kind": "done"})
    return 0


def entry(argv: list[str]) -> None:
    """Run main() as PID 1 of a fresh PID namespace (or under the subreaper fallback): every
    process the submission starts ends with it. The child flushes what the submission printed
    and leaves with os._exit, without running atexit hooks the submission may have registered;
    this process then ends the same way the child did (killed by SIGKILL, SIGSEGV, ... or an exit
    code), so the grader reads the worker's fate from its own wait status. A worker the fork
    server forked as PID 1 of a new namespace is that child already: the server reaps it."""
    if forked_as_namespace_init():  # the fork server made the namespace: nothing to supervise
        run_as_namespace_init(lambda: main(argv))
    relay_exit(run_in_pid_namespace(lambda: main(argv)))
