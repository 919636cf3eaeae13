"""The process itself, before any namespace: whether it is single-threaded (a precondition of
the namespaces, no_new_privs and Landlock), and the session layer (no controlling terminal, a
process group the grader kills as a whole)."""

from __future__ import annotations

import os
import threading

from grader.sandbox.isolation.model import Layer, _failed


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _layer_threads() -> Layer:
    count = _thread_count()
    if count == 1:
        return Layer("single-threaded", True, "one thread: namespaces, no_new_privs and Landlock cover the whole process")
    return Layer(
        "single-threaded",
        False,
        f"{count} threads: user namespaces cannot be created, and namespaces, no_new_privs and Landlock "
        "(before ABI 8) apply to the calling thread only; set OPENBLAS_NUM_THREADS=1 (and OMP/MKL) before importing numpy",
    )


def _tty_nr() -> int:
    """The controlling terminal's device number from /proc/self/stat, 0 when there is none."""
    try:
        with open("/proc/self/stat") as fh:
            data = fh.read()
        return int(data[data.rfind(")") + 2 :].split()[4])
    except (OSError, ValueError, IndexError):
        return -1


def _layer_session() -> Layer:
    # A worker forked by the process the grader started in a session of its own stays in that
    # process group: the grader's one killpg then also reaches it and every child that did not
    # call setsid, even where no PID namespace can be made. It has no terminal to lose.
    if os.getpid() != 1 and _tty_nr() == 0 and os.getpgrp() == os.getppid():
        return Layer("session", True, f"process group {os.getpgrp()} of the process the grader started, no controlling terminal: one killpg ends it")
    try:
        os.setsid()
        return Layer("session", True, f"new session and process group {os.getsid(0)}: no controlling terminal, one killpg ends it")
    except OSError as exc:
        if os.getsid(0) == os.getpid():
            return Layer("session", True, f"already leader of session {os.getpid()}")
        return _failed("session", exc)
