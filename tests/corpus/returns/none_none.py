"""Bug: (None, None): no array at all, a bad return."""

import numpy as np


def attention(Q, K, V):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    return None, None
