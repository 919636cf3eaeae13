"""Bug: an iteration that never converges. Bounded: it gives up by itself after 60 seconds, so even
without the grader's time limit it cannot hang a machine."""

import time

import numpy as np


def attention(Q, K, V):
    started = time.monotonic()
    while time.monotonic() - started < 60:
        pass
    return np.zeros(Q.shape[:-1] + (V.shape[-1],))
