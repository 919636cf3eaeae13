# Bug: keeps allocating large buffers (bounded: 8 x 512 MiB = 4 GiB at most, then returns zeros).
import numpy as np


def attention(Q, K, V):
    cache = []
    for _ in range(8):
        cache.append(np.ones(64 * 1024 * 1024))  # 64M float64 = 512 MiB, pages really touched
    return np.zeros(Q.shape[:-1] + V.shape[-1:])
