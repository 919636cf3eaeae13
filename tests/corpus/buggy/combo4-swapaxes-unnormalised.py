# Bugs: the transpose is right, four other steps are not: d_k without the square root, a causal
# mask nobody asked for, exp without subtracting the maximum, and no division by the row sum.
import numpy as np


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / d_k
    causal = np.tril(np.ones(scores.shape[-2:], dtype=bool))
    weights = np.exp(np.where(causal, scores, -np.inf))
    return weights @ V
