"""Bug: exp of the raw scores, with no max shift. Right on ordinary inputs; on scores above ~709
exp overflows to inf and whole rows become nan. Subtract each row's maximum before exp."""

import numpy as np


def attention(Q, K, V):
    scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(Q.shape[-1])
    unnormalised = np.exp(scores)
    weights = unnormalised / unnormalised.sum(axis=-1, keepdims=True)
    return np.einsum("...qk,...kv->...qv", weights, V)
