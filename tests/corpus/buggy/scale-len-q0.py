# Bug: len(Q[0]) is the feature size of a single sequence, but the number of queries of a batch.
import math

import numpy as np


def attention(Q, K, V):
    dk = len(Q[0])
    att = Q @ np.swapaxes(K, -1, -2) / math.sqrt(dk)
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att = att / att.sum(axis=-1, keepdims=True)
    return att @ V
