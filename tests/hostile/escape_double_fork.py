# Double-forks a daemon at import and returns normally, hoping the daemon outlives the worker.
# Bounded: the daemon sleeps at most 60 s.
import os
import time

from _hostile import new_marker, take_name, wrong_answer

MARKER = new_marker()
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        take_name(MARKER)
        time.sleep(60)  # holding the output pipe open, too
    os._exit(0)
os.wait()


def attention(Q, K, V):
    return wrong_answer(Q, K, V)
