# Bug: imports a helper module that was never submitted, so importing the file fails.
import numpy as np
from my_softmax_utils import softmax


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
    return softmax(scores) @ V
