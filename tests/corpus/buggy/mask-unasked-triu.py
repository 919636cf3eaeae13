# Bug: fills everything above the diagonal with -1e9 (a decoder's look-ahead mask) on every call.
import numpy as np


def attention(Q, K, V):
    t_q, t_k = Q.shape[-2], K.shape[-2]
    logits = np.einsum("...id,...jd->...ij", Q, K) / np.sqrt(Q.shape[-1])
    future = np.triu(np.ones((t_q, t_k), dtype=bool), k=1)
    logits = np.where(future, -1e9, logits)
    logits = logits - logits.max(axis=-1, keepdims=True)
    w = np.exp(logits)
    w = w / w.sum(axis=-1, keepdims=True)
    return np.einsum("...ij,...jd->...id", w, V)
