"""A compile cache for the JAX workers of a batch, written by the grader alone.

JAX compiles every operation for every shape it meets (XLA), and nothing compiled survives a fork,
so each JAX worker used to compile the same few hundred small programs again: most of its time.
JAX can keep compiled programs in a folder, its persistent compilation cache, looked up by a hash
of the program (without file names or line numbers), the compiler's version and its options. A
batch with JAX submissions gets such a folder, filled before its third JAX worker starts, and
each JAX worker from then on looks its operations up there; what it does not find it compiles
itself, as before.

A cache entry is native code that the worker runs, so who writes the folder matters:

* one process fills it: a fresh interpreter the grader starts (never a worker, never a fork of
  the grader, so it has never held a reference answer), running the grader's own attention, in
  the styles people commonly write (``STYLES``), on random inputs of the probes' shapes, with the
  gradients taken as the worker takes them. No stored value goes into it, only shapes;
* a worker reads it only where it cannot write it: the folder is one of its read-only paths, and
  the worker uses it only when Landlock's filesystem rules are in force (which make every
  readable path read-only; a mount namespace alone does not). Its JAX is also told never to write
  (a minimum compile time that no compilation reaches), so nothing it compiles is even tried;
* the folder belongs to the run: made with it, removed at its end. Nothing persists between runs,
  so no run can leave anything for the next.

The worker's half, which points its JAX at the folder, is grader.sandbox.compile_cache: no
worker imports this module and its styles. Only a batch gets a folder (see pipeline.run), filled
when its third JAX submission is about to run: filling takes about as long as two JAX workers
compiling for themselves (8 s on one core), so one or two JAX submissions would not repay it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from grader.sandbox.compile_cache import use_compile_cache
from grader.sandbox.env import BASE_ENV, IMPORT_BOOT, PACKAGE_ROOT

# The filling process is the grader's own code, but XLA is large: bounded all the same.
FILL_TIMEOUT_S = 300.0
# The grader's import path first, as for a worker (grader.sandbox.env.IMPORT_BOOT).
FILL_BOOT = IMPORT_BOOT + "from grader.jax_cache import fill_main; fill_main(sys.argv[1])"
# Filled when the third JAX submission of a batch asks: filling costs about what two JAX workers
# spend compiling for themselves, so one or two would not repay it.
FILL_AFTER = 3


@dataclass(frozen=True)
class CallShape:
    """The shapes of one probe call, all the filling process learns of a probe."""

    q: tuple[int, ...]
    k: tuple[int, ...]
    v: tuple[int, ...]
    g: tuple[int, ...] | None  # the output weights' shape of a gradient probe

    def as_list(self) -> list[Any]:
        return [list(self.q), list(self.k), list(self.v), None if self.g is None else list(self.g)]


def call_shapes(probes: list[Any]) -> list[CallShape]:
    """The distinct call shapes of ``probes`` (grader.probes.Probe); probes with a mask are left
    out (the styles below take none: such calls compile in the worker)."""
    shapes: list[CallShape] = []
    for probe in probes:
        if probe.mask is not None:
            continue
        shape = CallShape(probe.Q.shape, probe.K.shape, probe.V.shape, None if probe.G is None else probe.G.shape)
        if shape not in shapes:
            shapes.append(shape)
    return shapes


class JaxCompileCache:
    """The run's folder, filled on the ``fill_after``-th call of ``folder`` (later callers wait
    for it); ``close`` removes it. Thread-safe."""

    def __init__(self, fill_after: int | None = None) -> None:
        self.lock = threading.Lock()
        self.fill_after = FILL_AFTER if fill_after is None else fill_after
        self.asked = 0
        self.path: str | None = None
        self.tried = False
        self.why_not = ""

    def folder(self, probes: list[Any]) -> str | None:
        """The filled folder for a JAX submission about to run; None before the ``fill_after``-th
        asks, or when it could not be filled (``why_not`` then says why)."""
        with self.lock:
            self.asked += 1
            if not self.tried and self.asked >= self.fill_after:
                self.tried = True
                self.path, self.why_not = _filled(call_shapes(probes))
            return self.path

    def close(self) -> None:
        with self.lock:
            self.tried = True  # nothing is filled after the run
            path, self.path = self.path, None
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)


def _filled(shapes: list[CallShape]) -> tuple[str | None, str]:
    folder = tempfile.mkdtemp(prefix="grader-jax-cache-")
    home = tempfile.mkdtemp(prefix="grader-jax-fill-")  # the filling process's HOME and TMPDIR
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-c", FILL_BOOT, PACKAGE_ROOT, folder],
            input=json.dumps([shape.as_list() for shape in shapes]),
            text=True,
            capture_output=True,
            cwd="/",
            env={**BASE_ENV, "HOME": home, "TMPDIR": home},
            timeout=FILL_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        return None, f"the filling process failed: {type(exc).__name__}"
    except BaseException:  # interrupted: the process is killed by subprocess.run, the folder goes too
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if proc.returncode != 0 or not os.listdir(folder):
        shutil.rmtree(folder, ignore_errors=True)
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        return None, f"the filling process failed: {last[:200]}"
    # Readable by a worker that runs as another uid (nobody, when the grader is root), whatever
    # the umask; writable by no one but the grader.
    os.chmod(folder, 0o755)
    for name in os.listdir(folder):
        os.chmod(os.path.join(folder, name), 0o644)
    return folder, ""


# --------------------------------------------------------------------------------------------
# The filling process: the grader's own attention, in the common ways of writing it. An operation
# is found in the cache when the worker's program for it is the same (same operation, shapes,
# dtypes and parameters), whoever wrote the line: these styles cover the operations that most
# submissions, right and wrong, are made of.


def _swap(k: Any) -> Any:
    import jax.numpy as jnp

    return jnp.swapaxes(k, -1, -2)


def _matmul_sqrt(q: Any, k: Any, v: Any) -> Any:
    import jax
    import jax.numpy as jnp

    scores = jnp.matmul(q, _swap(k)) / jnp.sqrt(q.shape[-1])
    return jnp.matmul(jax.nn.softmax(scores, axis=-1), v)


def _operators_math(q: Any, k: Any, v: Any) -> Any:
    import jax

    scores = q @ k.swapaxes(-2, -1) / math.sqrt(q.shape[-1])
    return jax.nn.softmax(scores, axis=-1) @ v


def _einsum_power(q: Any, k: Any, v: Any) -> Any:
    import jax
    import jax.numpy as jnp

    scores = jnp.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
    return jnp.einsum("...qk,...kd->...qd", jax.nn.softmax(scores, axis=-1), v)


def _by_hand(q: Any, k: Any, v: Any) -> Any:
    import jax.numpy as jnp

    scores = q @ jnp.swapaxes(k, -2, -1) / jnp.sqrt(k.shape[-1])
    shifted = jnp.exp(scores - jnp.max(scores, axis=-1, keepdims=True))
    return (shifted / jnp.sum(shifted, axis=-1, keepdims=True)) @ v


def _seed_mistakes(q: Any, k: Any, v: Any) -> Any:
    """The two mistakes every cohort makes (scores divided by d_k, .T on a batch of keys)."""
    import jax
    import jax.numpy as jnp

    return jax.nn.softmax(jnp.matmul(q, k.T) / k.shape[-1], axis=-1) @ v


STYLES: tuple[Callable[[Any, Any, Any], Any], ...] = (_matmul_sqrt, _operators_math, _einsum_power, _by_hand, _seed_mistakes)


def _no_description(exc: BaseException) -> dict[str, Any]:
    return {}  # what a style raised is of no interest here


def fill(folder: str, shapes: list[CallShape]) -> int:
    """Run every style on random inputs of every shape, as the worker calls a submission (and
    takes its gradients), with JAX writing every compilation to ``folder``. Returns the number
    of calls that raised (a style that does not suit a rank raises after compiling what it
    reached)."""
    from grader.frameworks import preload
    from grader.sandbox.gradients import with_gradients

    preload("jax")
    use_compile_cache(folder, write=True)
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    raised = 0
    for shape in shapes:
        q, k, v = (rng.standard_normal(s) for s in (shape.q, shape.k, shape.v))
        for style in STYLES:
            try:
                if shape.g is None:
                    np.asarray(style(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v)))
                else:
                    with_gradients("jax", style, q, k, v, rng.standard_normal(shape.g), np.asarray, _no_description)
            except Exception:  # noqa: BLE001 - the grader's own style on a rank it does not suit
                raised += 1
    return raised


def fill_main(folder: str) -> None:
    """The filling process's entry: the call shapes as JSON on stdin."""
    shapes = [CallShape(tuple(q), tuple(k), tuple(v), None if g is None else tuple(g)) for q, k, v, g in json.load(sys.stdin)]
    fill(folder, shapes)
