import numpy as np


def attention(Q, K, V):
    print("Q", Q.shape, "K", K.shape, "V", V.shape)
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
    print("scores shape:", scores.shape)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    print("row sums ok:", np.allclose(weights.sum(axis=-1), 1.0))
    out = weights @ V
    print("output shape:", out.shape)
    return out
