"""The reference gradients: the analytic backward of the float64 reference attention.

The ``gradients`` check asks the worker for the gradients of the scalar ``L = sum(O * G)`` with
respect to Q, K and V, where O is the submission's output and G a fixed random array of O's
shape (``grader.probes.gradient_probe``). Here is what they must be. With
``s = 1 / sqrt(d_k)``, ``S = s Q K^T`` (masked scores set to -inf), ``P = softmax(S)`` over the
keys and ``O = P V``:

* ``dV = P^T G``: O is linear in V;
* ``dP = G V^T``: likewise in P;
* ``dS = P * (dP - rowsum(dP * P))``: the softmax's Jacobian, row by row
  (``dP_j/dS_k = P_j (delta_jk - P_k)``), applied to dP;
* ``dQ = s dS K`` and ``dK = s dS^T Q``: S is bilinear in Q and K.

A masked key has ``P = 0``, so ``dS = 0`` there: no gradient flows through a masked score. The
arrays are small (a few thousand elements), so the gradients are computed at grading time from
the probe's own inputs rather than stored: the same inputs always give the same numbers, and the
stored references need nothing new.
"""

from __future__ import annotations

import math

import numpy as np

from grader.attention import Array, attention_weights
from grader.masks import masked_weights

INPUTS = ("Q", "K", "V")


def attention_gradients(Q: Array, K: Array, V: Array, G: Array, mask: np.ndarray | None = None) -> dict[str, Array]:
    """{"Q": dL/dQ, "K": dL/dK, "V": dL/dV} for ``L = sum(attention(Q, K, V, mask) * G)``, in
    float64; any leading axes are batch axes."""
    Q, K, V, G = (np.asarray(a, dtype=np.float64) for a in (Q, K, V, G))
    s = 1.0 / math.sqrt(Q.shape[-1])
    P = attention_weights(Q, K) if mask is None else masked_weights(Q, K, mask)
    dV = np.matmul(np.swapaxes(P, -1, -2), G)
    dP = np.matmul(G, np.swapaxes(V, -1, -2))
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    dQ = s * np.matmul(dS, K)
    dK = s * np.matmul(np.swapaxes(dS, -1, -2), Q)
    return {"Q": dQ, "K": dK, "V": dV}
