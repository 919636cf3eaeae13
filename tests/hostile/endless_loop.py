# An endless loop in the call. Bounded: it gives up by itself after 60 s of wall-clock time.
import time

from _hostile import wrong_answer


def attention(Q, K, V):
    started = time.monotonic()
    while time.monotonic() - started < 60:
        pass
    return wrong_answer(Q, K, V)
