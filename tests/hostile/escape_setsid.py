# Starts a child that calls setsid() and forks again, so that the grandchild belongs to no process
# group or session of the worker, then hangs until the grader's time limit stops it. Bounded: the
# escaper sleeps at most 60 s and the call gives up after 60 s.
import os
import time

from _hostile import new_marker, take_name, wrong_answer


def attention(Q, K, V):
    marker = new_marker()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            take_name(marker)
            time.sleep(60)
        os._exit(0)
    os.wait()
    started = time.monotonic()
    while time.monotonic() - started < 60:
        time.sleep(0.05)
    return wrong_answer(Q, K, V)
