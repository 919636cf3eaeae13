# Bugs: plain np.exp of the scores, with neither the max shift nor the division by the row sum.
import numpy as np


def attention(Q, K, V):
    return np.exp(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])) @ V
