# Tries to take the grader down: SIGKILL to its parent and grandparent, to PID 1 and to its own
# process group. Bounded: only these four signals, never kill(-1); the kernel never lets SIGKILL
# reach the machine's init from inside its own namespace.
import os
import signal

from _hostile import attempt, wrong_answer


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as fh:
        data = fh.read()
    return int(data[data.rfind(")") + 2 :].split()[1])


PARENT = os.getppid()  # 0 inside a PID namespace: the parent lives outside it
attempt(f"kill parent {PARENT}", lambda: os.kill(PARENT, signal.SIGKILL))
if PARENT > 1:
    attempt("kill grandparent", lambda: os.kill(parent_of(PARENT), signal.SIGKILL))
attempt("kill 1", lambda: os.kill(1, signal.SIGKILL))
attempt("kill own group", lambda: os.killpg(os.getpgrp(), signal.SIGKILL))


def attention(Q, K, V):
    return wrong_answer(Q, K, V)
