# Sleeps at import, so the function never even gets defined in time. Bounded: 60 s at most.
import time

time.sleep(60)


def attention(Q, K, V):
    return Q
