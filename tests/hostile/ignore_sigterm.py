# Ignores SIGTERM (and SIGINT, SIGHUP) and hangs, hoping a polite stop is all the grader has.
# Bounded: it gives up after 60 s.
import signal
import time

from _hostile import new_marker, take_name, wrong_answer

for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(signum, signal.SIG_IGN)
take_name(new_marker())


def attention(Q, K, V):
    started = time.monotonic()
    while time.monotonic() - started < 60:
        time.sleep(0.05)
    return wrong_answer(Q, K, V)
