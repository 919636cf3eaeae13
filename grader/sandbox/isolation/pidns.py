"""The PID namespace: the worker as PID 1 of a namespace of its own, so that every process the
submission starts (setsid and double-fork included) dies with it.

``run_in_pid_namespace`` unshares a PID namespace (with a user namespace when not root) and
forks the worker into it, staying behind as its supervisor. A SIGTERM to that supervisor (the
grader's stop after a timeout) kills the worker and, in the subreaper fallback, sweeps what it
left, before the grader's SIGKILL of the whole group. The fork server does without that
supervising process where it can: ``NamespaceForks`` forks each worker straight into a
namespace of its own (as root directly, otherwise from a user namespace the server makes for
itself), and the worker runs through ``run_as_namespace_init`` (a SIGKILL to it then ends the
whole namespace). Where no PID namespace can be made, the subreaper fallback kills what the
worker left; it is weaker, as the pid-namespace layer then reports.
"""

from __future__ import annotations

import errno
import os
import select
import signal
from collections.abc import Callable
from typing import NoReturn

from grader.sandbox.isolation.identity import _die_now, set_parent_death_signal
from grader.sandbox.isolation.model import Layer
from grader.sandbox.isolation.namespaces import _enter_user_namespace
from grader.sandbox.isolation.supervisor import (
    _call_child,
    _catch_stop,
    _fork_supervised,
    _run_child_and_exit,
    _supervise,
    _sweep_descendants,
    _wait_and_follow,
)
from grader.sandbox.isolation.syscalls import CLONE_NEWPID, PR_SET_CHILD_SUBREAPER, _check, _libc, _prctl, _unshare

# How the current process was started, for the pid-namespace layer's detail. Set by
# run_in_pid_namespace in the child it forks (a fork inherits module state).
_PID_NS_STATE: str | None = None


def _layer_pid_namespace() -> Layer:
    if os.getpid() == 1:
        return Layer("pid-namespace", True, _PID_NS_STATE or "PID 1 of a PID namespace: every process left in it dies with this one")
    return Layer("pid-namespace", False, _PID_NS_STATE or "not PID 1 of a PID namespace: run the worker through run_in_pid_namespace()")


def _run_with_subreaper(child: Callable[[], int], why: str = "no PID namespace") -> int:
    """Fallback without namespaces: child() runs in a forked child while this process, a child
    subreaper, waits and then kills whatever the child left behind. It runs in a fork rather than
    in-process so the sweep also happens when child() calls os._exit or is killed. Weaker than a
    PID namespace: if this process is SIGKILLed, the sweep never runs and a sleeping escapee
    survives until the machine's init reaps it."""
    global _PID_NS_STATE
    try:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        reaper = "child subreaper + kill sweep"
    except OSError as exc:
        reaper = f"no subreaper ({exc.strerror}): only direct children are swept"
    parent = os.getpid()
    _catch_stop()
    try:
        pid = _fork_supervised()
    except OSError:
        # Cannot fork at all: run in-process, then sweep what it left.
        _PID_NS_STATE = f"{why}; child() ran in-process ({reaper})"
        try:
            return _call_child(child)
        finally:
            _sweep_descendants()
    if pid == 0:
        _PID_NS_STATE = f"{why}; fallback: {reaper}"
        try:
            set_parent_death_signal()
        except OSError:
            pass
        if os.getppid() != parent and os.getpid() != 1:  # in a PID namespace getppid() is 0
            _die_now()
        _run_child_and_exit(child)
    try:
        return _supervise(pid)
    finally:
        _sweep_descendants()


def _unshare_pid_namespace() -> str:
    """New PID namespace for the next fork: directly when privileged, else together with a user
    namespace. Raises OSError when neither is allowed."""
    try:
        _unshare(CLONE_NEWPID)
        return "PID 1 of a new PID namespace"
    except OSError as first:
        if first.errno not in (errno.EPERM, errno.EINVAL, errno.ENOSPC, errno.EUSERS):
            raise
    return "PID 1 of a new PID namespace (inside a new " + _enter_user_namespace(CLONE_NEWPID) + ")"


class NamespaceStuck(RuntimeError):
    """Returning to our own PID namespace failed: every later fork of this process would land in
    one shared namespace. The process must not fork workers any more (the fork server exits)."""


class NamespaceForks:
    """Forks each child straight into a PID namespace of its own, as its PID 1, for a process
    that forks many (the fork server). run_in_pid_namespace needs a supervising process per
    child because unshare(CLONE_NEWPID) changes where *all* later children of the caller go; a
    process privileged over its own PID namespace can undo that after each fork (setns back to
    its own namespace), so the child needs no supervisor and the parent reaps it directly: one
    fork and one exit per child instead of two.

    ``open()`` returns None where this process may not (it is not privileged in its user
    namespace, or the kernel refuses); ``behind_user_namespace()`` then makes a process that
    may. Where neither works, the children use run_in_pid_namespace themselves."""

    def __init__(self, home: int) -> None:
        self.home = home  # our own PID namespace, to return to after each fork

    @classmethod
    def open(cls) -> NamespaceForks | None:
        try:
            home = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        forks = cls(home)
        try:
            _unshare(CLONE_NEWPID)
        except OSError:
            os.close(home)
            return None
        forks._return_home()
        return forks

    @classmethod
    def behind_user_namespace(cls) -> NamespaceForks | None:
        """For a process not privileged over its own PID namespace: a user namespace of its own,
        and in it a PID namespace whose PID 1 is privileged over it and so can fork children into
        namespaces of their own. Three processes take part: this one (the caller), a middle one
        that makes the namespaces, and their PID 1, where this returns the forks. The caller and
        the middle process never return once that worked: each waits for the next with every
        other descriptor closed, and ends the way it ended; each dies with its parent
        (parent-death signal), so killing the caller ends them all, and PID 1 takes every
        process of its namespace with it. When the set-up fails (no user namespaces, or, as
        where a security module strips them of their capabilities, no PID namespaces made from
        one), the caller gets None, unchanged.

        The PID 1's process ids are those of its own namespace: whoever asks it for children
        must learn their ids as the world outside sees them (fork server: SCM_CREDENTIALS)."""
        caller = os.getpid()
        ready_r, ready_w = os.pipe()
        try:
            middle = os.fork()
        except OSError:
            os.close(ready_r)
            os.close(ready_w)
            return None
        if middle == 0:  # the middle process
            try:
                os.close(ready_r)
                set_parent_death_signal()
                if os.getppid() != caller:
                    _die_now()
                _enter_user_namespace(CLONE_NEWPID, strict=True)
                alive_r, alive_w = os.pipe()
                init = os.fork()
            except BaseException:  # noqa: BLE001 - no namespaces here: the caller carries on alone
                os._exit(1)
            if init == 0:  # PID 1 of the new namespace
                os.close(alive_w)
                set_parent_death_signal()
                if select.select([alive_r], [], [], 0)[0]:  # the middle process died before that
                    _die_now()
                os.close(alive_r)
                forks = cls.open()
                if forks is None:  # the namespace gave no privilege: the caller carries on alone
                    os._exit(1)
                os.write(ready_w, b"1")
                os.close(ready_w)
                return forks
            _wait_and_follow(init, alive_w)
        os.close(ready_w)
        try:
            ready = os.read(ready_r, 1) == b"1"  # end-of-file: the middle process gave up
        finally:
            os.close(ready_r)
        if not ready:
            os.waitpid(middle, 0)
            return None
        _wait_and_follow(middle)

    def _return_home(self) -> None:
        try:
            _check(_libc().setns(self.home, CLONE_NEWPID), "setns(CLONE_NEWPID)")
        except OSError as exc:
            raise NamespaceStuck(f"cannot return to the PID namespace of the fork server: {exc.strerror}") from None

    def fork(self) -> int:
        """os.fork() into a new PID namespace: 0 in the child (PID 1 there), the child's pid in
        the parent, whose own later children go where they went before. Raises OSError when the
        namespace or the fork fails (nothing is left changed), NamespaceStuck when the way back
        fails (the child, if any, is killed first)."""
        global _PID_NS_STATE
        _unshare(CLONE_NEWPID)
        try:
            pid = os.fork()
        except OSError:
            self._return_home()
            raise
        if pid == 0:
            _PID_NS_STATE = FORKED_AS_INIT
            os.close(self.home)
            return 0
        try:
            self._return_home()
        except NamespaceStuck:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise
        return pid


FORKED_AS_INIT = "PID 1 of a new PID namespace, forked so by the fork server: every process left in it dies with this one"


def forked_as_namespace_init() -> bool:
    """Whether NamespaceForks.fork made this process (PID 1 of its own PID namespace)."""
    return _PID_NS_STATE == FORKED_AS_INIT and os.getpid() == 1


def run_as_namespace_init(child: Callable[[], int]) -> NoReturn:
    """What run_in_pid_namespace's child does, for a process NamespaceForks made: run child()
    and exit with its code; the namespace, and every process in it, ends with this one."""
    _run_child_and_exit(child)


def run_in_pid_namespace(child: Callable[[], int]) -> int:
    """If possible unshare(CLONE_NEWPID) (with a user namespace when not root) and fork: the child
    becomes PID 1 of a new namespace and runs child(); when it exits the kernel kills every
    process left in the namespace (setsid and double-fork escapes die too). The parent waits,
    relays the exit status, and dies with the grader (parent-death signal). A SIGTERM to the
    parent (the grader's stop after a timeout) kills the child at once and returns. Falls back to
    a subreaper + kill sweep when namespaces are not allowed. Inherited file descriptors (the
    result pipe) are kept: fork shares them.

    Returns child()'s exit code, or 128 + N when the child was killed by signal N; end the
    process with ``relay_exit(code)`` so the grader sees the same status as without the wrapper.
    Call it once per process: the unshare changes where this process's later children go. Only
    the forked child runs child(); this function returns in the parent.
    """
    global _PID_NS_STATE
    expected_ppid = os.getppid()
    try:
        set_parent_death_signal()  # the wrapper dies with the grader, the child with the wrapper
    except OSError:
        pass
    if os.getppid() != expected_ppid:
        _die_now()
    _catch_stop()
    try:
        how = _unshare_pid_namespace()
    except OSError as exc:
        return _run_with_subreaper(child, f"PID namespace unavailable ({exc.strerror})")
    # A pipe only the wrapper holds open: the child sees EOF if the wrapper died before the
    # child's own PR_SET_PDEATHSIG took effect (getppid() cannot tell: it is 0 in the namespace).
    alive_r, alive_w = os.pipe2(os.O_CLOEXEC)
    try:
        pid = _fork_supervised()
    except OSError as exc:
        os.close(alive_r)
        os.close(alive_w)
        return _run_with_subreaper(child, f"fork into the PID namespace failed ({exc.strerror})")
    if pid == 0:
        _PID_NS_STATE = how
        os.close(alive_w)
        try:
            set_parent_death_signal()
        except OSError:
            pass
        if select.select([alive_r], [], [], 0)[0]:
            _die_now()
        os.close(alive_r)
        _run_child_and_exit(child)
    os.close(alive_r)
    try:
        return _supervise(pid)
    finally:
        os.close(alive_w)
