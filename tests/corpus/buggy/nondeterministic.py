# Bug: applies unseeded dropout to the weights at inference time, so every call gives a different answer.
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V, p=0.1):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
    weights = softmax(scores)
    keep = np.random.rand(*weights.shape) >= p
    weights = weights * keep / (1.0 - p)
    return weights @ V
