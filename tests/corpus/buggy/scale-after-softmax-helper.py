# Bug: split into small helpers, and the helper that scales runs on the probabilities, after normalising.
import math

import numpy as np


def similarity(q, k):
    return np.matmul(q, np.swapaxes(k, -1, -2))


def normalise(logits):
    shifted = logits - np.max(logits, axis=-1, keepdims=True)
    p = np.exp(shifted)
    return p / np.sum(p, axis=-1, keepdims=True)


def temperature(p, head_dim):
    return p * (1.0 / math.sqrt(head_dim))


def attention(Q, K, V):
    probs = temperature(normalise(similarity(Q, K)), Q.shape[-1])
    return np.matmul(probs, V)
