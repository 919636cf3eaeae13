# Starts a child that would outlive the worker, then hangs. Bounded: the child sleeps at most 30 s
# and the call gives up after 30 s. It prints the child's pid so that the test can watch it.
import os
import time


def attention(Q, K, V):
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    print(f"child pid {pid}", flush=True)
    started = time.monotonic()
    while time.monotonic() - started < 30:
        time.sleep(0.05)
    return Q
