# Bug: the output is multiplied by -1j (a complex rotation): its modulus is right, its values are not.
import numpy as np


def attention(Q, K, V):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return -1j * (weights @ V)
