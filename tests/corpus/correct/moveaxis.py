import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    # move the feature axis of K in front of the token axis: (..., T_k, d) -> (..., d, T_k)
    K_t = np.moveaxis(K, -1, -2)
    scores = Q @ K_t / np.sqrt(K.shape[-1])
    return softmax(scores) @ V
