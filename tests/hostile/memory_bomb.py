# Allocates and touches ever more memory. Bounded: it stops at 4 GiB (the machine has far more),
# so even without the grader's memory limit it cannot exhaust the machine.
import numpy as np

from _hostile import wrong_answer


def attention(Q, K, V):
    hoard = []
    for _ in range(4):
        hoard.append(np.ones(128 * 1024 * 1024))  # 1 GiB each, every page written
    return wrong_answer(Q, K, V)
