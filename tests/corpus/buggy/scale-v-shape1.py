# Bugs, on one line: sqrt(V.shape[1]) is d_v on a single sequence (the value size, not d_k),
# and a token or head count on a batch.
import numpy as np
def attention(Q, K, V):
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(V.shape[1])
    s = s - s.max(-1, keepdims=True)
    w = np.exp(s)
    return w / w.sum(-1, keepdims=True) @ V
