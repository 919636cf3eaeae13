# Written for (batch, heads, tokens, dim): Q.shape[2] is the token count on a 3-D batch.
import numpy as np


def attention(Q, K, V):
    single = Q.ndim == 2
    if single:
        Q, K, V = Q[None], K[None], V[None]
    scale = 1.0 / np.sqrt(Q.shape[2] if Q.ndim > 3 else Q.shape[-1])
    scores = np.einsum("...qd,...kd->...qk", Q, K) * scale
    scores -= scores.max(-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(-1, keepdims=True)
    out = p @ V
    return out[0] if single else out
