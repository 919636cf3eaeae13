# Bug: busy-loops instead of returning (bounded: gives up after 60 s and returns zeros).
import time

import numpy as np


def attention(Q, K, V):
    start = time.monotonic()
    while True:
        if time.monotonic() - start > 60.0:
            break
    return np.zeros(Q.shape[:-1] + V.shape[-1:])
