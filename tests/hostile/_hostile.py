"""Shared by the hostile submissions (a helper module, not a submission: its name starts with _).

A hostile submission must be observable from outside even when it runs in a PID namespace, where
its own pids mean nothing to the test. So each process it starts renames itself (the kernel's
"comm", visible in /proc/PID/comm of the whole machine) to a random marker printed on stdout; the
test reads the marker from the captured output and looks for any process still carrying it.

hostile.json next to the submissions (written by the test) says where to connect, what to try to
write, and so on; without it the attacks that need it do nothing.
"""

import ctypes
import json
import os
import secrets
import sys

import numpy as np

PR_SET_NAME = 15


def config():
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile.json")) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def new_marker():
    marker = "hx" + secrets.token_hex(5)  # 12 characters: comm keeps 15
    print(f"MARKER {marker}", flush=True)
    return marker


def take_name(marker):
    """Rename the calling process to ``marker`` (prctl is a syscall, not a file write: no
    filesystem rule stands in its way)."""
    try:
        ctypes.CDLL(None).prctl(PR_SET_NAME, ctypes.c_char_p(marker.encode()), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def report(what, outcome):
    print(f"{what}: {outcome}", flush=True)
    sys.stdout.flush()


def attempt(what, action):
    """Run one attack and print what happened; an attack never stops the submission."""
    try:
        result = action()
        report(what, f"SUCCEEDED {result if result is not None else ''}".rstrip())
    except BaseException as exc:  # noqa: BLE001 - any failure is the expected outcome
        report(what, f"failed {type(exc).__name__}: {exc}")


def wrong_answer(Q, K, V):
    """The right shape, the wrong values: what is left once an attack got nothing."""
    return np.zeros(Q.shape[:-1] + (V.shape[-1],))
