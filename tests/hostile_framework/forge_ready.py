# Forges the worker's "ready" message (which starts the submission's clock for torch / jax) on every
# inherited descriptor at import, hoping to reset its deadline, then sleeps past the time limit.
# Bounded: the sleep ends by itself after 20 s.
import os
import time

from grader.sandbox.protocol import encode

for fd in range(3, 64):
    try:
        os.write(fd, encode({"kind": "ready"}))
    except OSError:
        pass


def attention(Q, K, V):
    time.sleep(20)
    return Q
