# Starts a child that would outlive the worker, then hangs until the time limit. Bounded: the
# child sleeps at most 60 s and the call gives up after 30 s.
import os
import time

from _hostile import new_marker, take_name


def attention(Q, K, V):
    marker = new_marker()
    if os.fork() == 0:
        take_name(marker)
        time.sleep(60)
        os._exit(0)
    started = time.monotonic()
    while time.monotonic() - started < 30:
        time.sleep(0.05)
    return Q
