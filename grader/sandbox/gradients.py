"""The worker's half of the gradients check: differentiating the submission, reported as data.

For a probe with ``gradients: true`` the worker calls the function once more, with inputs that
require gradients, and asks the framework's own autograd for the gradients of the scalar
``sum(output * G)`` with respect to Q, K and V (G comes with the probe, drawn by the grader):

* PyTorch: leaf tensors with ``requires_grad=True``, then
  ``torch.autograd.grad((output * G).sum(), (q, k, v), allow_unused=True)``: an input the
  output does not depend on through the graph gets ``None``;
* JAX: ``jax.vjp`` of the function, its pullback applied to G (compiled with ``jax.jit``, or op
  by op where jit cannot trace the function): an input cut off by ``stop_gradient`` gets zeros.

Whatever happens is sent as plain data in the result's ``gradients`` field, never raised past
the worker's protocol: ``computed`` (each gradient as an array, or named in ``none``),
``no-gradient`` (the output carries no autograd graph: ``.detach()``, ``torch.no_grad()``, a NumPy
round trip, a tensor rebuilt from ``.item()``), ``failed`` (the backward raised: its type, message
and line) or ``no-output`` (nothing of G's shape was returned to differentiate). An exception of
the forward call itself (``q.numpy()`` on a tensor that requires grad, a JAX tracer turned into
a NumPy array) is the call's own exception, recorded like any other.

Nothing here judges: which gradients are right is the grader's business (grader/checks/gradients.py).
torch and jax are imported inside the functions: this module is imported before isolation by
every worker, NumPy ones too, and the framework itself only by a worker that grades one.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

INPUTS = ("Q", "K", "V")
MAX_ITEMS = 4  # of a returned tuple or list, as for the values (worker.MAX_TUPLE_ITEMS)

Call = Callable[[Any, Any, Any], Any]  # the submission, its mask and calling convention bound
Plain = Callable[[Any], "np.ndarray | None"]  # a tensor to a plain ndarray copy (worker.to_array)
Describe = Callable[[BaseException], dict[str, Any]]  # an exception as data (worker.describe_error)


class _NoOutput(Exception):
    """Raised inside jax.vjp's function when the return holds no array of G's shape."""


def framework_of(sample: Any) -> str | None:
    """"torch" or "jax" for the arrays the worker hands the function, None for NumPy arrays (no
    autograd: gradient probes are skipped)."""
    module = type(sample).__module__ or ""
    if module.startswith("torch"):
        return "torch"
    if module.startswith(("jax", "jaxlib")):
        return "jax"
    return None


def _shape_is(value: Any, shape: tuple[int, ...]) -> bool:
    try:
        return tuple(int(n) for n in value.shape) == shape
    except BaseException:  # noqa: BLE001 - a returned object's .shape is the submission's code
        return False


def pick_output(value: Any, shape: tuple[int, ...], is_array: Callable[[Any], bool]) -> tuple[Any, int | None]:
    """The returned array of G's shape, and its index when it is an item of a returned tuple or
    list ((output, weights) or (weights, output): the output is the one of the output's shape;
    where both shapes are equal the first is taken). (None, None) when there is none."""
    if is_array(value):
        return (value, None) if _shape_is(value, shape) else (None, None)
    if isinstance(value, (tuple, list)):
        for index, item in enumerate(value[:MAX_ITEMS]):
            if is_array(item) and _shape_is(item, shape):
                return item, index
    return None, None


def _type_name(obj: Any) -> str:
    cls = type(obj)
    module = getattr(cls, "__module__", "") or ""
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module == "builtins" else f"{module}.{name}"


def _no_output(value: Any, shape: tuple[int, ...], framework: str) -> dict[str, Any]:
    return {"status": "no-output", "reason": f"returned {_type_name(value)[:200]}, with no {framework} array of shape {list(shape)} to differentiate"}


def with_gradients(framework: str, call: Call, Q: np.ndarray, K: np.ndarray, V: np.ndarray, G: np.ndarray, plain: Plain, describe: Describe) -> tuple[Any, dict[str, Any], dict[str, np.ndarray]]:
    """Call the function on Q, K and V requiring gradients, and differentiate sum(output * G).
    Returns (what the call returned: the output differentiated when there is one, the result's
    ``gradients`` field, the gradient arrays named ``grad.Q`` ...). Raises only what the forward
    call itself raises."""
    if framework == "torch":
        return _torch(call, Q, K, V, G, plain, describe)
    return _jax(call, Q, K, V, G, plain, describe)


def _torch(call: Call, Q: np.ndarray, K: np.ndarray, V: np.ndarray, G: np.ndarray, plain: Plain, describe: Describe) -> tuple[Any, dict[str, Any], dict[str, np.ndarray]]:
    import torch

    inputs = [torch.from_numpy(a).requires_grad_(True) for a in (Q, K, V)]
    value = call(*inputs)
    out, item = pick_output(value, G.shape, lambda x: isinstance(x, (torch.Tensor, np.ndarray)))
    if out is None:
        return value, _no_output(value, G.shape, "torch"), {}
    meta: dict[str, Any] = {"item": item}
    if not isinstance(out, torch.Tensor):  # the end of a NumPy round trip
        meta.update(status="no-gradient", none=list(INPUTS), reason=f"returned a {_type_name(out)[:200]}, which carries no autograd graph")
        return out, meta, {}
    started = time.perf_counter()
    try:
        # Read through the Tensor class: a subclass may say anything of itself.
        # (getattr: the descriptor's type differs with and without torch's stubs for mypy.)
        needs = bool(getattr(torch.Tensor, "requires_grad").__get__(out))
        if not needs:
            meta.update(status="no-gradient", none=list(INPUTS), reason="the output does not require grad: no autograd graph leads from Q, K or V to it")
            return out, meta, {}
        # The scalar itself, not grad_outputs=G: the same gradients, and a non-scalar output
        # makes torch check shapes with sympy, imported on first use (half a second, in the sandbox).
        loss = (out * torch.from_numpy(G).to(dtype=out.dtype)).sum()
        grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    except BaseException as exc:  # noqa: BLE001 - a custom backward may raise anything, SystemExit too
        meta.update(status="failed", error=describe(exc), duration=time.perf_counter() - started)
        return out, meta, {}
    meta["duration"] = time.perf_counter() - started
    meta, arrays = _computed(meta, grads, plain)
    return out, meta, arrays


def _jax(call: Call, Q: np.ndarray, K: np.ndarray, V: np.ndarray, G: np.ndarray, plain: Plain, describe: Describe) -> tuple[Any, dict[str, Any], dict[str, np.ndarray]]:
    import jax
    import jax.numpy as jnp

    seen: dict[str, Any] = {}

    def forward(q: Any, k: Any, v: Any) -> Any:
        value = call(q, k, v)
        out, item = pick_output(value, G.shape, lambda x: isinstance(x, (jax.Array, np.ndarray)))
        seen["value"], seen["item"] = value, item
        if out is None:
            raise _NoOutput
        return out

    inputs, weights = [jnp.asarray(a) for a in (Q, K, V)], jnp.asarray(G)

    def both(q: Any, k: Any, v: Any, g: Any) -> Any:
        out, pullback = jax.vjp(forward, q, k, v)
        return out, pullback(g.astype(out.dtype))

    started = time.perf_counter()
    try:
        # Compiled whole: one XLA compilation per probe instead of one per operation, several
        # times faster in a fresh worker. What jit cannot trace (Python control flow on an array's
        # values, an integer output) is differentiated op by op below, as jax.vjp alone allows: the
        # function is then called a second time.
        out, grads = jax.jit(both)(*inputs, weights)
    except _NoOutput:
        return None, _no_output(seen.get("value"), G.shape, "jax"), {}
    except BaseException:  # noqa: BLE001 - whatever it was, the eager run below meets it again and reports it
        pass
    else:
        meta: dict[str, Any] = {"item": seen.get("item"), "duration": time.perf_counter() - started}
        meta, arrays = _computed(meta, grads, plain)
        return out, meta, arrays
    try:
        out, pullback = jax.vjp(forward, *inputs)
    except _NoOutput:
        return None, _no_output(seen.get("value"), G.shape, "jax"), {}
    meta = {"item": seen.get("item")}
    started = time.perf_counter()
    try:
        if not jnp.issubdtype(out.dtype, jnp.inexact):
            meta.update(status="no-gradient", none=list(INPUTS), reason=f"the output is of dtype {out.dtype}, which carries no gradient")
            return out, meta, {}
        grads = pullback(weights.astype(out.dtype))
    except BaseException as exc:  # noqa: BLE001 - a custom_vjp backward may raise anything
        meta.update(status="failed", error=describe(exc), duration=time.perf_counter() - started)
        return out, meta, {}
    meta["duration"] = time.perf_counter() - started
    meta, arrays = _computed(meta, grads, plain)
    return out, meta, arrays


def _computed(meta: dict[str, Any], grads: Any, plain: Plain) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The ``computed`` field, and the gradients as plain arrays (``None`` ones are named in it)."""
    arrays: dict[str, np.ndarray] = {}
    none: list[str] = []
    unreadable: list[str] = []
    for label, grad in zip(INPUTS, grads):
        if grad is None:
            none.append(label)
            continue
        array = plain(grad)
        if array is None:
            unreadable.append(label)
        else:
            arrays[f"grad.{label}"] = array
    meta.update(status="computed", none=none)
    if unreadable:  # not a numeric array: judged as a wrong gradient
        meta["unreadable"] = unreadable
    return meta, arrays
