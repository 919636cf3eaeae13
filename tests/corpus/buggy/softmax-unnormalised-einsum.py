# Bug: an einsum version whose "softmax" stops after np.exp: the normalising sum is computed but never used.
import numpy as np


def attention(Q, K, V):
    d = Q.shape[-1]
    logits = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(d)
    logits = logits - np.max(logits, axis=-1, keepdims=True)
    unnorm = np.exp(logits)
    total = np.sum(unnorm, axis=-1, keepdims=True)  # noqa: F841
    return np.einsum("...qk,...kv->...qv", unnorm, V)
