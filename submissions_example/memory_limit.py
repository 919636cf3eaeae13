"""Bug: builds ever larger buffers. Bounded: it stops at 4 GiB, so even without the grader's memory
limit it cannot exhaust a machine."""

import numpy as np


def attention(Q, K, V):
    buffers = []
    for _ in range(8):
        buffers.append(np.ones(64 * 1024 * 1024))  # 512 MiB each
    return np.zeros(Q.shape[:-1] + (V.shape[-1],))
