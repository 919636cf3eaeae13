"""Fixes written in the submission's own framework.

The registry's fixes are numpy. A submission that imports torch or JAX is told the same fix in
its own words (``k.transpose(-2, -1)``, ``math.sqrt(q.size(-1))``, ``jnp.swapaxes``); a mistake with
no entry here keeps the registry's text, which says what to do without naming functions.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace

from grader.diagnosis.model import Diagnosis
from grader.diagnosis.registry import BY_NAME

_SCALE = {
    "torch": "scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))   # the feature size, the last axis",
    "jax": "scores = q @ jnp.swapaxes(k, -1, -2) / jnp.sqrt(q.shape[-1])   # the feature size, the last axis",
}
_STABLE = {
    "torch": "weights = torch.softmax(scores, dim=-1)   # subtracts the row maximum for you",
    "jax": "weights = jax.nn.softmax(scores, axis=-1)   # subtracts the row maximum for you",
}

FIXES: dict[str, dict[str, str]] = {
    "scale-by-dk": _SCALE,
    "scale-missing": _SCALE,
    "scale-by-seq-len": _SCALE,
    "scale-multiplied": _SCALE,
    "scale-by-dv": _SCALE,
    "scale-constant": _SCALE,
    "scale-other": _SCALE,
    "scale-after-softmax": {
        "torch": "weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)   # scale inside the softmax",
        "jax": "weights = jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2) / jnp.sqrt(q.shape[-1]), axis=-1)   # scale inside the softmax",
    },
    "batch-transpose": {
        "torch": "Swap only the last two axes: k.transpose(-2, -1), right for any number of leading axes (not k.T, transpose(0, 1) or permute(0, 2, 1)).",
        "jax": "Swap only the last two axes: jnp.swapaxes(k, -1, -2), right for any number of leading axes.",
    },
    "softmax-wrong-axis": {
        "torch": "weights = torch.softmax(scores, dim=-1)   # always name dim; each query's row over the keys sums to 1",
        "jax": "weights = jax.nn.softmax(scores, axis=-1)   # each query's row over the keys sums to 1",
    },
    "softmax-missing": {
        "torch": "weights = torch.softmax(scores, dim=-1); return weights @ v",
        "jax": "weights = jax.nn.softmax(scores, axis=-1); return weights @ v",
    },
    "softmax-unstable": _STABLE,
    "softmax-unnormalised": _STABLE,
    "not-differentiable": {
        "torch": "Stay on tensors from q, k, v to the output: no .detach(), .numpy(), .item() or torch.no_grad(); torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1) @ v",
        "jax": "Stay in jnp from q, k, v to the output: no np.asarray, float() or jax.lax.stop_gradient (except on the max subtracted for stability)",
    },
    "input-mutated": {
        "torch": "q = q / math.sqrt(q.size(-1))   # a new tensor, not q /= ... or q.div_(...)",
        "jax": "Build new arrays (q = q / jnp.sqrt(q.shape[-1])); never write into the caller's arrays through np.asarray views",
    },
    "softmax-log": {
        "torch": "weights = torch.softmax(scores, dim=-1)   # not torch.log_softmax; or log_weights.exp()",
        "jax": "weights = jax.nn.softmax(scores, axis=-1)   # not jax.nn.log_softmax; or jnp.exp(log_weights)",
    },
    "mask-unasked": {
        "torch": "Apply a mask only when one is given: if mask is not None: scores = scores.masked_fill(~mask, float('-inf')).",
        "jax": "Apply a mask only when one is given: if mask is not None: scores = jnp.where(mask, scores, -jnp.inf).",
    },
    "mask-inverted": {
        "torch": "True means keep: scores = scores.masked_fill(~mask, float('-inf')) (not masked_fill(mask, ...)).",
        "jax": "True means keep: scores = jnp.where(mask, scores, -jnp.inf) (not jnp.where(mask, -jnp.inf, scores)).",
    },
    "mask-after-softmax": {
        "torch": "Mask the scores before the softmax: scores = scores.masked_fill(~mask, float('-inf')), then torch.softmax(scores, dim=-1).",
        "jax": "Mask the scores before the softmax: scores = jnp.where(mask, scores, -jnp.inf), then jax.nn.softmax(scores, axis=-1).",
    },
    "mask-ignored": {
        "torch": "scores = scores.masked_fill(~mask, float('-inf')) before the softmax (True = keep).",
        "jax": "scores = jnp.where(mask, scores, -jnp.inf) before the softmax (True = keep).",
    },
    # The registry's says "the numpy array": a tensor converted, listed or cut is the mistake here.
    "bad-return": {
        "torch": "Return the tensor `weights @ v` itself, of shape (..., T_q, d_v): not a list (.tolist()), a number (.item()) or a slice of it.",
        "jax": "Return the jax.Array `weights @ v` itself, of shape (..., T_q, d_v): not a list (.tolist()), a number (.item()) or a slice of it.",
    },
    "reduced-precision": {
        "torch": "Compute in the inputs' dtype (float64): leave out .float(), .half(), .bfloat16(), .to(torch.float32 / float16 / bfloat16) and torch.autocast; float32 passes the tolerance, float16 and bfloat16 do not.",
        "jax": "Compute in the inputs' dtype (float64): leave out .astype(jnp.float32 / float16 / bfloat16) and dtype= float32 / float16 / bfloat16, and keep jax_enable_x64 on; float32 passes the tolerance, float16 and bfloat16 do not.",
    },
    "gradient-mismatch": {
        "torch": "Drop the custom torch.autograd.Function (or its backward) and let autograd differentiate the forward; or check the backward against torch.autograd.gradcheck",
        "jax": "Drop the jax.custom_vjp (or its bwd) and let jax.grad differentiate the forward; or check it against jax.test_util.check_grads",
    },
}


def framework_of(tree: ast.Module | None) -> str | None:
    """"torch" or "jax" if the file imports it (torch first where both are), else None."""
    if tree is None:
        return None
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module.split(".")[0])
    return next((f for f in ("torch", "jax") if f in found), None)


# One-letter names of the inputs in the fixes' code (Q, K, V in numpy's, q, k, v in torch's and
# JAX's); ``d_k`` and ``T_q`` are not matched (the underscore is part of the word).
_INPUT = re.compile(r"\b([QKVqkv])\b")
# Fixes whose letters are the formula's, not the submission's variables.
_FORMULAS = frozenset({"function-missing", "values-mismatch", "gradient-mismatch"})


def in_framework(d: Diagnosis, framework: str | None, inputs: dict[str, str] | None = None) -> Diagnosis:
    """The fix in the submission's framework and with its own names for the inputs: ``inputs``
    maps the letters of the fix's code to the submission's names (see locate.Source.inputs), so
    the line to write can be pasted as it is."""
    own = d.fix != BY_NAME[d.name].fix  # a fix the diagnosis wrote from its evidence is kept
    text = (None if own else FIXES.get(d.name, {}).get(framework or "")) or d.fix
    if inputs and d.name not in _FORMULAS:
        text = _INPUT.sub(lambda m: inputs.get(m.group(1), m.group(1)), text)
    return replace(d, fix=text) if text != d.fix else d
