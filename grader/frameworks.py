"""Which array framework a submission works in, and handing it inputs of that framework.

A PyTorch submission calls ``torch.softmax`` or ``k.transpose(-2, -1)`` and needs tensors; a JAX one
is happiest with ``jax.Array``. The grader decides which one from what the submission imports,
reading its syntax tree (it never imports the submission), unless the suite says so
(``framework: numpy | torch | jax | auto``).

Two halves live here:

* the grader's half (``imported_frameworks``, ``choose``, ``installed``): pure, imports nothing of
  torch or jax;
* the worker's half (``worker_adapter``, ``relative_limits``): imports the framework in the worker,
  *before* the submission is loaded and before the resource limits are set. The framework is code
  of the installed environment, not of the candidate, and it maps far more address space than a
  NumPy worker (torch about 0.6 GB, JAX about 1.4 GB once its CPU backend is up), so an absolute
  address-space limit of 1 GB would make ``import jax`` itself fail. With a framework, the memory
  and CPU limits are therefore counted from the point where the framework is ready: the candidate
  gets the same budget on top of the framework as a NumPy submission gets on top of numpy.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import threading
import warnings
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


def imported_modules(tree: ast.Module) -> list[str]:
    """Every module an import statement names (absolute imports only), outside main guards."""
    names: list[str] = []
    # Walked by hand, not with ast.walk: a main guard's whole subtree must be left out.
    stack: list[ast.AST] = [s for s in tree.body if not _is_main_guard(s)]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        stack.extend(child for child in ast.iter_child_nodes(node) if not _is_main_guard(child))
    return names


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


def worker_adapter(framework: str) -> Adapter:
    """Import ``framework`` and return the function that turns a float64 (or bool) ndarray into its
    array type, on the CPU. Raises ImportError when the framework cannot be imported."""
    if framework == "torch":
        import torch

        torch.set_num_threads(1)
        torch.from_numpy(np.ones(1)).sum()  # start the CPU kernels now, not in the first call
        return torch.from_numpy  # shares the worker's own copy: in-place changes stay visible
    if framework == "jax":
        # CPU only, and float64 as for everyone else (JAX computes in float32 unless told).
        os.environ["JAX_PLATFORMS"] = "cpu"
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        # The CPU backend maps about 1 GB of address space when it starts; start it before the
        # limits are counted (see the module docstring).
        warm = jnp.asarray(np.ones((1, 2, 2)))
        np.asarray(jax.nn.softmax(warm @ jnp.swapaxes(warm, -1, -2), axis=-1))
        return jnp.asarray
    return lambda array: array


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
