"""Which array framework a submission works in, and handing it inputs of that framework.

A PyTorch submission calls ``torch.softmax`` or ``k.transpose(-2, -1)`` and needs tensors; a JAX one
is happiest with ``jax.Array``. The grader decides which one from what the submission imports,
reading its syntax tree (it never imports the submission), unless the suite says so
(``framework: numpy | torch | jax | auto``).

Two halves live here:

* the grader's half (``imported_frameworks``, ``choose``, ``installed``): pure, imports nothing of
  torch or jax;
* the worker's half (``preload``, ``worker_adapter``, ``relative_limits``): imports the framework
  in the worker (or once in the framework's fork server, which forks the workers with it
  imported), *before* the submission is loaded and before the resource limits are set. The
  framework is code of the installed environment, not of the candidate, and it maps far more
  address space than a NumPy worker (torch about 0.6 GB, JAX about 1.4 GB once its CPU backend is up), so an absolute
  address-space limit of 1 GB would make ``import jax`` itself fail. With a framework, the memory
  and CPU limits are therefore counted from the point where the framework is ready: the candidate
  gets the same budget on top of the framework as a NumPy submission gets on top of numpy.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import os
import sys
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Literal

import numpy as np

Framework = Literal["numpy", "torch", "jax"]
FRAMEWORKS: tuple[Framework, ...] = ("numpy", "torch", "jax")
SETTINGS = ("auto", "numpy", "torch", "jax")  # what a suite or --framework may say

# Top-level module names that mean "this code works on that framework's arrays".
_ROOTS: dict[str, Framework] = {"torch": "torch", "jax": "jax", "jaxlib": "jax", "flax": "jax", "equinox": "jax"}
# The module whose presence says the framework is installed.
_MODULE: dict[Framework, str] = {"numpy": "numpy", "torch": "torch", "jax": "jax"}


class FrameworkChoiceError(ValueError):
    """The framework cannot be decided (both torch and jax are imported) or is not installed."""


def install_hint(framework: Framework) -> str:
    return f"pip install 'attention-grader[{framework}]'"


def _is_main_guard(node: ast.AST) -> bool:
    """``if __name__ == "__main__":`` blocks are demos: what they import does not count."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    parts = [node.test.left, *node.test.comparators]
    return any(isinstance(p, ast.Name) and p.id == "__name__" for p in parts) and any(
        isinstance(p, ast.Constant) and p.value == "__main__" for p in parts
    )


def statements(tree: ast.AST) -> Iterator[ast.AST]:
    """``tree`` and every statement and clause (except, case) in it, in ast.walk's order."""
    return (node for node in ast.walk(tree) if isinstance(node, (ast.mod, ast.stmt, ast.excepthandler, ast.match_case)))


def _is_test(node: ast.AST) -> bool:
    """The file's own pytest tests (``test_*`` functions, ``Test*`` classes): pytest runs them,
    the grader never does."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name.startswith("test")
    return isinstance(node, ast.ClassDef) and node.name.startswith("Test")


# Attributes of torch tensors that NumPy arrays lack: code that calls them is torch code, whatever
# its imports say (``(q @ k.transpose(-2, -1)).softmax(-1)`` names no module at all).
TENSOR_ONLY = frozenset({
    "softmax", "log_softmax", "size", "dim", "permute", "view", "unsqueeze", "contiguous", "masked_fill", "masked_fill_",
    "mT", "detach", "bmm", "matmul", "float", "double", "type_as", "to", "cuda", "cpu", "numpy", "expand", "exp", "div", "mul", "clamp",
})


@dataclass
class _Scan:
    """What a module imports and uses, apart by where: its code, its own tests, its main guards."""

    imports: list[tuple[str, str, str]] = field(default_factory=list)  # (module, the name it binds, "code" / "test" / "main")
    used: set[str] = field(default_factory=set)  # names loaded by the code
    used_by_tests: set[str] = field(default_factory=set)  # names loaded in tests and main guards
    # The code's uses of tensor-only attributes, by what they are taken of: the name (np of
    # np.exp is numpy's function, not a tensor's method), or "" for anything else.
    tensor_attributes: set[str] = field(default_factory=set)
    dim_keyword: bool = False  # the code passes dim=, as torch does and NumPy does not


def _scan(tree: ast.Module) -> _Scan:
    scan = _Scan()
    # Walked by hand, not with ast.walk: whether a node is inside a main guard or a test matters.
    stack: list[tuple[ast.AST, str]] = [(node, "code") for node in tree.body]
    while stack:
        node, where = stack.pop()
        if _is_main_guard(node):
            where = "main"
        elif where == "code" and _is_test(node):
            where = "test"
        if isinstance(node, ast.Import):
            scan.imports.extend((alias.name, alias.asname or alias.name.split(".")[0], where) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            scan.imports.extend((node.module, alias.asname or alias.name, where) for alias in node.names)
        elif isinstance(node, ast.Name):
            (scan.used if where == "code" else scan.used_by_tests).add(node.id)
        elif where == "code" and isinstance(node, ast.Attribute) and node.attr in TENSOR_ONLY:
            scan.tensor_attributes.add(node.value.id if isinstance(node.value, ast.Name) else "")
        elif where == "code" and isinstance(node, ast.keyword) and node.arg == "dim":
            scan.dim_keyword = True
        stack.extend((child, where) for child in ast.iter_child_nodes(node))
    return scan


def imported_modules(tree: ast.Module) -> list[str]:
    """Every module an import statement names (absolute imports only), outside main guards, less
    a framework that only the file's own tests use when the code graded is NumPy code: ``import
    torch`` at the top of a NumPy solution whose test compares it with torch would otherwise
    hand the function tensors. Otherwise every import counts, one never used by name too
    (tensor methods need no name), and all of code that calls a tensor-only method."""
    scan = _scan(tree)
    numpy_names = {name for module, name, where in scan.imports if module.split(".")[0] == "numpy" and where == "code"}
    tensor_like = scan.dim_keyword or bool(scan.tensor_attributes - numpy_names)
    numpy_code = bool(numpy_names & scan.used) and not tensor_like

    def counts(module: str, name: str, where: str) -> bool:
        if where == "main":
            return False
        if not numpy_code or module.split(".")[0] not in _ROOTS:
            return True
        return where == "code" and (name in scan.used or name not in scan.used_by_tests)

    return [module for module, name, where in scan.imports if counts(module, name, where)]


# Parsed sources, by their text: a submission's file is parsed to find its framework and again to
# locate its mistakes; one parse serves both. Only texts the locator reads are kept (up to
# _TREE_BYTES), a few at a time (a batch's threads each hold one submission between the two).
_TREE_BYTES = 100_000


_PARSING = threading.Lock()
# The most source the grader parses in one go. Real submissions are a few KB; a generated file of
# a few MB costs the parser seconds and about 500 bytes of memory per byte (1.9 MB: 9 s, 0.9 GB).
# A longer source is not parsed: its framework is not detected from its imports, nor its lines
# located, and discovery does not look for the function in it.
MAX_PARSED_BYTES = 256 * 1024


class SourceTooLarge(ValueError):
    """A source longer than MAX_PARSED_BYTES, refused before the parser sees it."""


def parse_quietly(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """ast.parse(source), its warnings dropped, never printed: a SyntaxWarning (``"\\d"``, ``is``
    with a literal) quotes the candidate's line on stderr, where a CI runner would read a
    ``##[...]`` in it as a workflow command. catch_warnings swaps process-wide filters, so
    batch threads parse one at a time. Raises what ast.parse raises, and SourceTooLarge."""
    if len(source) > MAX_PARSED_BYTES:
        raise SourceTooLarge(f"{filename}: {len(source)} bytes of source, more than the {MAX_PARSED_BYTES} the grader parses")
    with _PARSING, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source, filename=filename)


@functools.lru_cache(maxsize=16)
def _parse_kept(text: str) -> ast.Module:
    return parse_quietly(text)


def parse_source(text: str) -> ast.Module:
    """ast.parse(text), shared with the last few callers that parsed the same text. Raises what
    ast.parse raises; a tree is never changed by its readers."""
    return _parse_kept(text) if len(text) <= _TREE_BYTES else parse_quietly(text)


def frameworks_of(modules: list[str]) -> set[Framework]:
    return {_ROOTS[m.split(".")[0]] for m in modules if m.split(".")[0] in _ROOTS}


def imported_frameworks(source: str) -> set[Framework]:
    """The frameworks ``source`` imports; empty for NumPy-only code and for code that does not
    parse (the worker reports the syntax error itself)."""
    try:
        tree = parse_source(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    return frameworks_of(imported_modules(tree))


def choose(setting: str, found: set[Framework]) -> Framework:
    """The framework to grade in: the suite's setting, else the one the submission imports.
    Raises FrameworkChoiceError when the submission imports both torch and jax."""
    if setting != "auto":
        return setting  # type: ignore[return-value]
    if len(found) > 1:
        raise FrameworkChoiceError(
            "this submission imports both torch and jax, so the grader cannot tell which arrays it takes; "
            "set `framework:` in the suite (or pass --framework)"
        )
    return next(iter(found)) if found else "numpy"


def installed(framework: Framework) -> bool:
    """Whether the worker (the same interpreter) can import the framework; imports nothing."""
    try:
        return importlib.util.find_spec(_MODULE[framework]) is not None
    except (ImportError, ValueError):
        return False


# JAX compiles every operation once per input shape the first time it sees it: about 0.5 s per
# distinct shape on a 2-core machine, which is not the submission being slow. So a JAX submission
# gets this much more time per distinct probe shape.
JAX_COMPILE_S_PER_SHAPE = 1.0


def compile_allowance(framework: Framework, distinct_shapes: int) -> float:
    """Extra seconds of time limit for a framework that compiles per input shape."""
    return JAX_COMPILE_S_PER_SHAPE * distinct_shapes if framework == "jax" else 0.0


# How torch and JAX report an allocation refused by the address-space limit: not as MemoryError.
_ALLOCATION_FAILURES = ("DefaultCPUAllocator: can't allocate memory", "RESOURCE_EXHAUSTED: Out of memory")


def is_framework_memory_error(error_type: str, message: str) -> bool:
    return error_type in ("RuntimeError", "jax.errors.JaxRuntimeError", "jaxlib.xla_extension.XlaRuntimeError") and any(
        text in message for text in _ALLOCATION_FAILURES
    )


def missing_message(framework: Framework) -> str:
    return f"this submission imports {framework}, which is not installed; install it with {install_hint(framework)}"


# --------------------------------------------------------------------------------------------
# The worker's half: runs in the worker process, never in the grader.

Adapter = Callable[[Any], Any]


# The frameworks preload() has set up in this process (in a fork server, before any fork).
_PRELOADED: set[str] = set()
# Modules a framework imports lazily at a first use every worker makes: torch.autograd.grad with
# grad_outputs imports torch's symbolic shapes, and sympy with them (about 0.3 s); JAX's first
# lowering its MLIR dialects. A fork server imports them once (``ahead``) instead of every worker.
# Pure Python and extension modules: importing them runs nothing of the framework.
_LAZY_IMPORTS: dict[str, tuple[str, ...]] = {
    "torch": ("torch.fx.experimental.symbolic_shapes",),
    "jax": ("jaxlib.mlir.dialects.mhlo",),
}


def preload(framework: str, ahead: bool = False) -> None:
    """Import ``framework`` and configure it without running a single operation: what a fork
    server does once before it forks workers (grader.sandbox.forkserver), and the first step of
    worker_adapter in a fresh worker. It starts no thread, so a process may fork afterwards:
    torch starts its intra-op and inter-op pools at the first parallel operation, never at
    import, and is told here to use one thread for each; JAX's CPU backend, whose client starts
    a thread pool, is left for the worker to start (worker_adapter). ``ahead`` (a fork server)
    also imports what the framework would import lazily in each worker. Idempotent: nothing is
    done twice in a worker forked from a server that ran it. Raises whatever the framework's
    import raises (ImportError for a missing one)."""
    if framework in _PRELOADED:
        return
    if framework == "torch":
        import torch

        torch.set_num_threads(1)
        # Allowed once per process, and only before any inter-op work: hence _PRELOADED.
        torch.set_num_interop_threads(1)
    elif framework == "jax":
        # CPU only, and float64 as for everyone else (JAX computes in float32 unless told).
        # Set in the configuration as well: a forked worker's environment is replaced.
        os.environ["JAX_PLATFORMS"] = "cpu"
        import jax

        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_enable_x64", True)
        import jax.numpy  # noqa: F401
    for name in _LAZY_IMPORTS.get(framework, ()) if ahead else ():
        try:
            importlib.import_module(name)
        except ImportError:  # another version of the framework: its workers import what they use
            pass
    _PRELOADED.add(framework)


def worker_adapter(framework: str) -> Adapter:
    """Make ``framework`` ready to run (preload, unless a fork server did; then start what may
    start threads) and return the function that turns a float64 (or bool) ndarray into its array
    type, on the CPU. Called in the worker after the isolation layers that need a single thread
    and before the resource limits. Raises ImportError when the framework cannot be imported."""
    preload(framework)
    if framework == "torch":
        import torch

        torch.set_num_threads(1)  # one intra-op thread in every worker, whoever imported torch
        torch.from_numpy(np.ones(1)).sum()  # start the CPU kernels now, not in the first call
        return torch.from_numpy  # shares the worker's own copy: in-place changes stay visible
    if framework == "jax":
        import jax
        import jax.numpy as jnp

        # The CPU backend maps its address space and starts its threads when it starts: start it
        # before the limits are counted (see the module docstring). Nothing is compiled here:
        # every worker compiles for itself (nothing compiled survives a fork), and a warm-up
        # compilation would only cost each of them its time.
        jax.devices()
        jnp.asarray(np.ones(1))
        return jnp.asarray
    return lambda array: array


def compile_eagerly(framework: str) -> None:
    """After the submission is loaded, before it is called: a torch.compile it applied runs the
    function as written. The sandbox lets no compiler run (inductor needs a C++ toolchain) and
    what is graded is the arithmetic. torch's documented switch for that is the compiler's
    "force_eager" stance, which torch._dynamo holds: set only when loading the submission
    imported torch._dynamo (torch.compile does), so a submission that never compiles pays
    nothing. The workers' environment also has TORCH_COMPILE_DISABLE=1 (grader.sandbox.env) for
    a compile first made inside a call; that one still refuses fullgraph=True."""
    if framework == "torch" and "torch._dynamo" in sys.modules:
        import torch

        try:
            set_stance = getattr(torch.compiler, "set_stance", None)  # torch 2.6 and later
            if set_stance is not None:
                set_stance("force_eager")
        except BaseException:  # noqa: BLE001 - torch as the submission left it, maybe patched: it runs as it is
            pass


def _address_space_bytes() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def relative_limits(limits: dict[str, Any]) -> dict[str, Any]:
    """The worker's limits counted from now: the address space the framework already maps is
    added, so the submission's own budget is the one the suite gives. (CPU time needs nothing
    here: the rlimits layer of grader.sandbox.isolation always counts it from the moment it is
    applied.)"""
    out = dict(limits)
    if out.get("memory_bytes") is not None:
        out["memory_bytes"] = int(out["memory_bytes"]) + _address_space_bytes()
    return out
