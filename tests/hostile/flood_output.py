# Prints about 8 MB (bounded) before returning a correct result.
import sys

import numpy as np

for _ in range(2000):
    sys.stdout.write("x" * 4096 + "\n")


def attention(Q, K, V):
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    w = np.exp(s - s.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True) @ V
