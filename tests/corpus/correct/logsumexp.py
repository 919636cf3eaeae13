# Correct: the weights as exp(scores - logsumexp(scores)), scaling the keys (a new array) first.
import numpy as np


def logsumexp(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    return m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def attention(Q, K, V):
    K_scaled = K * (1.0 / np.sqrt(K.shape[-1]))
    scores = np.einsum("...ik,...jk->...ij", Q, K_scaled)
    return np.exp(scores - logsumexp(scores)) @ V
