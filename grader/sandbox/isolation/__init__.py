"""Isolation layers the worker applies to itself before it loads an untrusted submission.

Everything here is best effort and independently fallible: each layer is tried, and one that the
kernel, the container or the privileges of this run refuse is reported as inactive (with the
reason) instead of raising. The grader shows the list (``grade --sandbox-info``) so that a run
with weaker isolation is visible rather than silent. Only the standard library is used (ctypes
for the few syscalls Python 3.11 does not wrap: unshare, mount, prctl, capset, Landlock).

How the worker uses it::

    code = run_in_pid_namespace(lambda: worker_main(...))   # worker_main calls apply_isolation()
    relay_exit(code)   # a child killed by SIGKILL/SIGXCPU shows up to the grader as such

``run_in_pid_namespace`` makes the worker PID 1 of a fresh PID namespace (or the fork server's
``NamespaceForks`` forks it as such); inside, after numpy is imported and the request is read,
``apply_isolation(policy)`` applies the other layers, in the order it gives with its reasons.

One module per concern, each with the syscalls it needs:

* ``model``: Policy in, Layer out, the guarantees strict mode asks for.
* ``syscalls``: libc through ctypes (prctl, unshare, mount, syscall) and /proc/self/status.
* ``paths``: canonical paths, the default readable paths, reachability for a uid.
* ``process``: the single-threaded check and the session layer.
* ``namespaces``: user, network and IPC namespaces.
* ``mounts``: the mount namespace (hidden paths covered, readable paths made reachable).
* ``landlock``: the filesystem, TCP and scoping rulesets.
* ``limits``: the rlimits.
* ``identity``: the drop to nobody and of capabilities, parent-death signal, no_new_privs.
* ``keyring``: a private user keyring and a fresh session keyring.
* ``supervisor``: running a function in a forked child and ending as it ended.
* ``pidns``: the PID namespace, the fork server's NamespaceForks, the subreaper fallback.

Pitfalls for the caller:

* Threads. Set OPENBLAS_NUM_THREADS=1 (and OMP_/MKL_) before numpy is imported; the
  "single-threaded" layer reports the thread count. PR_SET_PDEATHSIG fires when the *thread*
  that forked the worker exits, so the grader must not start workers from short-lived threads.
* Hidden paths inside a readable folder leave the folders above them traverse-only under
  Landlock (Landlock cannot grant "list this folder but not that subfolder"). Python's import
  system lists a sys.path folder once and caches it, so the worker must import numpy (which
  fills the site-packages cache) and everything of the grader it needs before isolation.
* After the drop to uid 65534, the submission's folder must be readable by others (a
  tempfile.mkdtemp folder is 0700) unless the mount namespace could make it reachable; the
  detail of "unprivileged-user" lists what stays unreachable. Set TMPDIR to the workdir: /tmp
  is not writable.
* RLIMIT_NPROC counts every process of the uid (65534) on the machine, so parallel workers share
  it; RLIMIT_CPU is per process (each child of the submission has its own); RLIMIT_AS counts
  address space (about 100 MiB for Python + numpy with one OpenBLAS thread, more per thread).

What is not covered: seccomp (the submission may still call unshare(CLONE_NEWUSER), io_uring,
...), cgroups (memory is bounded by RLIMIT_AS, not by a cgroup). Landlock (ABI <= 7) controls
neither UDP nor connecting to a pathname unix socket: the network namespace removes UDP, and the
mount namespace replaces the folders where sockets of others live (/tmp, /run, the grading
user's home) by a view of the worker's own paths; without it, after the drop to uid 65534 only
world-writable sockets stay connectable.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Collection

from grader.sandbox.isolation.identity import NOBODY, _can_drop_to_nobody, _layer_no_new_privs, _layer_parent_death, _layer_unprivileged, _why_root_stays, set_parent_death_signal
from grader.sandbox.isolation.keyring import _layer_keyring
from grader.sandbox.isolation.landlock import _enforce, _prepare
from grader.sandbox.isolation.limits import _layer_rlimits, _vm_size
from grader.sandbox.isolation.model import GUARANTEES, LAYER_NAMES, Layer, Policy, _failed, missing_guarantees, why_missing
from grader.sandbox.isolation.mounts import _layer_mount
from grader.sandbox.isolation.namespaces import _layer_ipc, _layer_network, _user_namespace_if_needed
from grader.sandbox.isolation.paths import _existing, _outermost, _real, default_readable_paths
from grader.sandbox.isolation.pidns import (
    FORKED_AS_INIT,
    NamespaceForks,
    NamespaceStuck,
    _layer_pid_namespace,
    forked_as_namespace_init,
    run_as_namespace_init,
    run_in_pid_namespace,
)
from grader.sandbox.isolation.process import _layer_session, _layer_threads, _thread_count
from grader.sandbox.isolation.supervisor import close_descriptors_except, relay_exit

__all__ = [
    "FORKED_AS_INIT",
    "GUARANTEES",
    "LAYER_NAMES",
    "Layer",
    "NamespaceForks",
    "NamespaceStuck",
    "Policy",
    "apply_isolation",
    "close_descriptors_except",
    "default_readable_paths",
    "forked_as_namespace_init",
    "missing_guarantees",
    "probe_layers",
    "relay_exit",
    "run_as_namespace_init",
    "run_in_pid_namespace",
    "set_parent_death_signal",
    "why_missing",
]


def apply_isolation(policy: Policy, *, only: Collection[str] | None = None) -> list[Layer]:
    """Called inside the (single-threaded!) worker process, after it imported numpy and read its
    request, before it imports the submission. Applies every layer that works here, never raises
    for a layer that is unavailable, returns what is active.

    ``only`` restricts the run to the named layers (for tests and diagnosis); the others are
    reported inactive as "not selected". Landlock sets no_new_privs itself when it needs it.

    The order, and why it is that order (the numbers mark the steps below):

     0. check that the process is single-threaded: unshare(CLONE_NEWUSER) refuses threaded
        callers, and namespaces, no_new_privs and Landlock (before ABI 8's TSYNC) apply to the
        calling thread only. OpenBLAS starts a thread per core at import unless
        OPENBLAS_NUM_THREADS=1.
     1. session: no controlling terminal, and a process group the grader kills as a whole: the
        group of the process the grader started when that process forked us (so one killpg
        reaches us and our children even without a PID namespace), else a new session (setsid).
     2. user namespace, only when the process lacks CAP_SYS_ADMIN (not root): it is what lets an
        unprivileged process create the network and mount namespaces. Must come before them and
        needs a single thread.
     3. network and IPC namespaces: need CAP_SYS_ADMIN (real, or from step 2).
     4. mount namespace: make / private first (otherwise the mounts would propagate to the host
        and hide the references from the grader itself), replace the shared folders (/tmp,
        /run, the home folder, ...) by a view of the worker's own paths, make the readable
        paths reachable for the unprivileged user (see ``mounts``), mount an empty read-only tmpfs over every hidden
        path, and mount a fresh /proc when PID 1 of a new PID namespace. Must come before
        Landlock: a Landlock-restricted process can no longer mount.
     5. Landlock rulesets are built (paths opened with O_PATH) while still privileged and after
        the mounts, so the rules point at the final mount tree, but only enforced in step 10.
     6. rlimits: after the setup work above that allocates memory and file descriptors, before
        the uid change (root may set any hard limit; afterwards it could only lower them).
     7. the workdir is chowned to the unprivileged user (needs CAP_CHOWN, so before step 8).
     8. unprivileged user: setgroups([]), setgid/setuid(65534) when root, else drop every
        capability. After everything that needs privileges. Root stays root (without
        capabilities) when 65534 could not read a readable path even after step 4: a correct
        submission must never become a load error because of the sandbox.
    8b. keyring: a user namespace of the worker's own (its user keyring is then its own, not
        uid 65534's that every worker shares) and a fresh session keyring (not the grader's).
        After step 8, so the keyrings belong to the unprivileged uid; before step 9, since
        entering a user namespace changes the credentials and the kernel then clears the
        parent-death signal.
     9. parent-death signal and no_new_privs: PR_SET_PDEATHSIG is cleared by the kernel on every
        change of euid/egid, so it is set after step 8. no_new_privs is required for Landlock
        (restrict_self without CAP_SYS_ADMIN) and blocks regaining privileges through setuid
        binaries or file capabilities.
    10. Landlock restrict_self (filesystem, TCP, signal/abstract-socket scoping): last, so that
        none of the steps above is itself restricted.
    """

    def want(name: str) -> bool:
        return only is None or name in only

    def run(name: str, layer: Callable[[], Layer]) -> Layer:
        # Each layer handles the failures it expects; this catches the ones it does not, so that
        # one surprising error costs one layer and never the worker.
        if not want(name):
            return Layer(name, False, "not selected")
        try:
            return layer()
        except Exception as exc:  # noqa: BLE001
            return _failed(name, exc)

    ppid = os.getppid()  # step 9 checks that this parent is still there once the signal is set
    layers = [_layer_threads()]  # 0
    threads = _thread_count()
    hidden = _outermost(_existing(policy.hidden))  # a path inside a hidden one is hidden with it
    readable = _existing(policy.readable)
    workdir = _real(policy.workdir)
    layers.append(run("session", _layer_session))  # 1
    layers += _user_namespace_if_needed(want)  # 2
    layers.append(run("network-namespace", _layer_network))  # 3
    layers.append(run("ipc-namespace", _layer_ipc))
    drop = want("unprivileged-user") and _can_drop_to_nobody()  # decided now: step 4 prepares for it
    layers.append(run("mount-namespace", lambda: _layer_mount(policy, hidden, (NOBODY, NOBODY) if drop else None)))  # 4
    kept_because = _why_root_stays(readable, workdir) if drop else ""
    drop = drop and not kept_because
    rulesets = _prepare(policy, hidden, want)  # 5
    try:
        still_root = not drop and os.geteuid() == 0
        layers.append(run("rlimits", lambda: _layer_rlimits(policy, will_be_root=still_root)))  # 6
        layers.append(run("unprivileged-user", lambda: _layer_unprivileged(workdir, readable, drop, kept_because)))  # 7, 8
        layers.append(run("keyring", _layer_keyring))  # 8b
        layers.append(run("parent-death-signal", lambda: _layer_parent_death(ppid)))  # 9
        layers.append(run("no-new-privs", _layer_no_new_privs))
        enforced = _enforce(rulesets, threads)  # 10
    finally:
        rulesets.close()
    layers += [layer if want(layer.name) else Layer(layer.name, False, "not selected") for layer in enforced]
    layers.append(_layer_pid_namespace())
    return layers


def _probe_body(policy: Policy, out_fd: int) -> int:
    layers = apply_isolation(policy)
    payload = json.dumps([[layer.name, layer.active, layer.detail] for layer in layers]).encode()
    view = memoryview(payload)
    while view:
        view = view[os.write(out_fd, view) :]
    return 0


def probe_layers(timeout_s: float = 15.0) -> list[Layer]:
    """Cheap check of which layers would work on this machine, done in a throwaway forked child;
    used by `grade --sandbox-info`. The child goes through run_in_pid_namespace and
    apply_isolation exactly as a worker would, on a scratch policy, and reports over a pipe."""
    base = tempfile.mkdtemp(prefix="grader-probe-")
    try:
        os.chmod(base, 0o711)  # enterable by the unprivileged user, like any workdir parent
        workdir = os.path.join(base, "work")
        shown = os.path.join(base, "ro")
        secret = os.path.join(shown, "hidden")
        os.makedirs(workdir)
        os.makedirs(secret, mode=0o755)
        os.chmod(shown, 0o755)
        policy = Policy(
            workdir=workdir,
            readable=default_readable_paths(shown),
            hidden=(secret,),
            cpu_seconds=10,
            memory_bytes=_vm_size() + 2**30,
            file_bytes=2**20,
            open_files=256,
            processes=64,
        )
        read_fd, write_fd = os.pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(read_fd)
            os.close(write_fd)
            return [Layer("probe", False, f"cannot fork a probe: {exc}")]
        if pid == 0:
            code = 1
            try:
                os.close(read_fd)
                code = run_in_pid_namespace(lambda: _probe_body(policy, write_fd))
            finally:
                os._exit(code)
        os.close(write_fd)
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                    break
                chunk = os.read(read_fd, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(read_fd)
            try:
                os.kill(pid, signal.SIGKILL)  # it is done or stuck; either way it ends now
            except OSError:
                pass
            os.waitpid(pid, 0)
        try:
            return [Layer(str(n), bool(a), str(d)) for n, a, d in json.loads(b"".join(chunks))]
        except (ValueError, TypeError):
            return [Layer("probe", False, "the probe child reported nothing (crashed or timed out)")]
    finally:
        shutil.rmtree(base, ignore_errors=True)
