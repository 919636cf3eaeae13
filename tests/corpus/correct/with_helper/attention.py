import numpy as np
from softmax_helper import softmax


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
    return softmax(scores, axis=-1) @ V
