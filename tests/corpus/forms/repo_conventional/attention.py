"""attention.py at the top of the checkout, using the candidate's own helper package."""

import numpy as np

from mylib.ops import stable_softmax


def attention(Q, K, V):
    return stable_softmax(np.matmul(Q, np.swapaxes(K, -1, -2)) / np.sqrt(Q.shape[-1])) @ V
