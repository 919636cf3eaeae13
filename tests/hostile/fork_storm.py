# A fork storm with a ceiling: up to 200 processes in all, each sleeping 10 s and then exiting.
# The parent reports how many it started before the kernel refused.
import os
import time

from _hostile import new_marker, report, take_name, wrong_answer

MARKER = new_marker()
started, refused = 0, "never"
while started < 200:
    try:
        pid = os.fork()
    except OSError as exc:
        refused = f"{type(exc).__name__}: {exc}"
        break
    if pid == 0:
        take_name(MARKER)
        time.sleep(10)
        os._exit(0)
    started += 1
report("fork storm", f"started {started}, refused: {refused}")


def attention(Q, K, V):
    return wrong_answer(Q, K, V)
