"""A pre-warmed process that forks one worker per submission.

A fresh interpreter per submission pays the interpreter start and numpy's import (about 0.1 s)
every time. The fork server pays it once: it is started as a *fresh* interpreter (exec, never a
fork of the grader, so it has never held the reference answers or anything else of the grader's
memory), imports numpy and the worker module, and then forks one child per submission. The child
runs exactly what a fresh worker runs, ``worker.entry``, so every isolation step the worker takes
before loading the submission applies in both start modes; before that it puts itself where a
fresh worker would be: its own session and process group, stdin on /dev/null, stdout and stderr
on the capped output pipe, the fresh working folder, the reduced environment, no other file
descriptor open.

The grader keeps every limit it enforces on a fresh worker: it owns the pipes, applies the
deadline and kills the child's process group. Only reaping moves: the child is the server's, so
the server waits for it and reports its exit status and peak memory.

Protocol, over one SOCK_SEQPACKET control socket (one message per request, never split):

* grader -> server: JSON ``{"workdir", "env"}`` with four descriptors attached (``send_fds``):
  the request pipe (read end), the result pipe (write end), the output pipe (write end) and a
  reply socket for this request;
* server -> grader, on the reply socket: ``{"pid", "init"}`` once forked, then ``{"status",
  "max_rss_kb", "cpu_s"}`` once reaped (status as from ``wait``). ``init`` is true when the
  server forked the worker as PID 1 of a PID namespace of its own (isolation.NamespaceForks):
  no supervising process then stands between the two, and the grader ends the worker with
  SIGKILL alone (a namespace's init ignores SIGTERM). A server without privileges does that
  from a user and PID namespace of its own, where pids are numbered apart: it then sends
  ``{"pid_in_credentials": true, "init"}`` with the worker's pid in SCM_CREDENTIALS, which the
  kernel translates into the grader's namespace.

A server that must not fork answers ``{"refused": why}`` instead of a pid, and the grader starts a
fresh worker: one whose process has more than one thread (a forked child would inherit the
memory of threads it does not have, locks they hold included), or a framework server that could
not import its framework.

When the grader goes away (its end of the control socket closes), the server kills every child's
process group and exits.

Framework servers. A torch or JAX submission in a worker forked from the NumPy server would
still import its framework itself, about a second each time. So a run has one server per
framework it needs (``ForkServers``): NumPy's, started with the run, and torch's or JAX's,
started when the first submission of that framework asks for one, so a batch without one never
starts it. A framework server imports its framework once (grader.frameworks.preload) without
running anything: torch told to use one intra-op and one inter-op thread before any operation
(its pools start at the first parallel one), JAX without its CPU backend, whose client starts a
thread pool and is made by each worker after the fork. Each worker then does exactly what a fresh
one does, minus the import. Where a worker of a framework cannot be forked from that framework's
server (none could start, it refused, it is gone), it imports the framework itself, forked from
the NumPy server or as a fresh interpreter, and its report says why (the ``fork-server`` entry of
its sandbox layers).
"""

from __future__ import annotations

import gc
import json
import os
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
from typing import IO, Any

from grader.errors import SandboxError
from grader.sandbox.env import BASE_ENV, IMPORT_BOOT, PACKAGE_ROOT
from grader.sandbox.isolation import Layer, NamespaceForks, NamespaceStuck, close_descriptors_except, set_parent_death_signal
from grader.sandbox.isolation.process import _thread_count

# The collector is off while the server imports (see serve). IMPORT_BOOT (env.py) takes
# PACKAGE_ROOT off argv and sets the import path the workers forked from here inherit.
SERVER_BOOT = "import gc; gc.disable(); " + IMPORT_BOOT + "from grader.sandbox.forkserver import OWN_NAMESPACES, serve; serve(int(sys.argv[1]), sys.argv[2] == OWN_NAMESPACES, sys.argv[3])"
# serve()'s second argument: make the user namespace even where the server would not need one.
OWN_NAMESPACES = "own-namespaces"
# The first request may wait for the server's own start (numpy's import, or torch's or JAX's:
# about a second on an idle machine) on a loaded machine.
START_TIMEOUT_S = 30.0
# After the worker's pipes closed, it has nothing left to do but exit, once it has swept what the
# submission left behind (without a PID namespace that sweep may take up to 5 s: see
# isolation.supervisor); killing it earlier would leave the rest running.
EXIT_GRACE_S = 6.0
REAP_TIMEOUT_S = 10.0
MESSAGE_BYTES = 64 * 1024
CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):  # os.kill as well: the child may not have called setsid yet
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _exits_within(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Whether ``proc`` ends within ``timeout`` seconds (it is left to be reaped). Woken by the
    exit itself through a pidfd where the system has them: Popen.wait(timeout) polls with growing
    sleeps, a few milliseconds late on every cold run."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def _send_json(sock: socket.socket, data: dict[str, Any]) -> None:
    try:
        sock.send(json.dumps(data).encode())
    except OSError:
        pass  # the grader stopped waiting (interrupted); nothing to tell


# --------------------------------------------------------------------------------------------
# The grader's side


class ForkedWorker:
    """A worker forked by the server: what runner.py needs of a process (pid, stdout, reap)."""

    def __init__(self, pid: int, reply: socket.socket, stdout: IO[bytes]) -> None:
        self.pid = pid
        self.reply = reply
        self.stdout = stdout
        # PID 1 of its own PID namespace, with no supervising process: a SIGKILL ends it and
        # everything it started, and it ignores SIGTERM (the kernel shields a namespace's init).
        self.namespace_init = False

    def _wait(self, timeout: float) -> dict[str, Any] | None:
        return self._receive(timeout)[0]

    def _receive(self, timeout: float) -> tuple[dict[str, Any] | None, int]:
        """The server's next message (None on timeout, {} when it is gone or garbled) and the
        pid in its credentials (0 when it has none)."""
        self.reply.settimeout(timeout)
        try:
            data, ancillary, _flags, _address = self.reply.recvmsg(MESSAGE_BYTES, socket.CMSG_SPACE(CREDENTIALS.size))
        except socket.timeout:
            return None, 0
        except OSError:
            data, ancillary = b"", []
        sender_pid = 0
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(value) >= CREDENTIALS.size:
                sender_pid = CREDENTIALS.unpack_from(value)[0]
        try:
            message = json.loads(data) if data else {}
        except ValueError:
            message = {}
        return (message if isinstance(message, dict) else {}), sender_pid

    def reap(self) -> tuple[int | None, int | None, int, float]:
        """Exit code, signal, peak resident memory (KB) and CPU seconds, as runner._reap returns them."""
        try:
            message = self._wait(EXIT_GRACE_S)
            if message is None:  # closed its pipes but did not exit: end it
                _kill_group(self.pid)
                message = self._wait(REAP_TIMEOUT_S) or {}
        finally:
            self.reply.close()
            self.stdout.close()
        status, rss, cpu = message.get("status"), message.get("max_rss_kb"), message.get("cpu_s")
        rss = rss if type(rss) is int and rss >= 0 else 0
        cpu = float(cpu) if isinstance(cpu, (int, float)) and not isinstance(cpu, bool) and cpu >= 0 else 0.0
        if type(status) is not int:
            # The server died (or was killed, perhaps by a submission) before it could say. The
            # runner trusts a run only if the worker also sent "done" on its own pipe, and after
            # "done" a worker only exits: 0 is the one exit code consistent with that.
            return 0, None, rss, cpu
        if os.WIFSIGNALED(status):
            return None, os.WTERMSIG(status), rss, cpu
        return os.WEXITSTATUS(status), None, rss, cpu


class ForkServer:
    """The grader's handle on a running fork server. Thread-safe: batch threads share one."""

    def __init__(self, proc: subprocess.Popen[bytes], control: socket.socket, framework: str = "numpy") -> None:
        self.proc = proc
        self.control = control
        self.framework = framework  # what the server imported before forking: numpy, torch or jax
        self.lock = threading.Lock()
        self.usable = True
        self.closed = False
        self.spawned = 0
        self.why_not = ""  # once not usable: why, for the reports ("refused to fork: ...")

    @classmethod
    def start(cls, own_namespaces: bool = False, framework: str = "numpy") -> ForkServer | None:
        """Start a server (it warms up in the background) that imports ``framework`` (numpy,
        torch or jax) before it forks. None where the platform has no SOCK_SEQPACKET or
        descriptor passing: callers then start fresh workers. ``own_namespaces`` makes the
        server take the unprivileged way to namespaces even when it runs as root (see serve),
        so that a privileged test can try it."""
        if not hasattr(socket, "SOCK_SEQPACKET") or not hasattr(socket, "send_fds"):
            return None
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except OSError:
            return None
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-c", SERVER_BOOT, PACKAGE_ROOT, str(theirs.fileno()), OWN_NAMESPACES if own_namespaces else "-", framework],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                env=dict(BASE_ENV),
                pass_fds=(theirs.fileno(),),
                start_new_session=True,  # Ctrl-C on the terminal reaches the grader only
            )
        except OSError:
            ours.close()
            return None
        finally:
            theirs.close()
        return cls(proc, ours, framework)

    def _unusable(self, why: str) -> None:
        self.usable = False
        self.why_not = self.why_not or why

    def spawn(self, req_r: int, res_w: int, workdir: str, env: dict[str, str]) -> ForkedWorker | None:
        """Fork a worker on these pipes. None when the server cannot: the caller starts a fresh
        worker instead (and this server is not asked again). Raises SandboxError once the server
        was closed: grading is stopping (Ctrl-C), and no worker of any kind may start now."""
        if self.closed:
            raise SandboxError("grading was stopped")
        if not self.usable:
            return None
        out_r, out_w = os.pipe()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        mine.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # the worker's pid, as we see it
        try:
            with self.lock:
                socket.send_fds(self.control, [json.dumps({"workdir": workdir, "env": env}).encode()], [req_r, res_w, out_w, theirs.fileno()])
        except OSError:
            self._unusable(self._gone())
            mine.close()
            os.close(out_r)
            return None
        finally:
            theirs.close()
            os.close(out_w)
        worker = ForkedWorker(0, mine, open(out_r, "rb", buffering=0))
        received, sender_pid = worker._receive(START_TIMEOUT_S)
        message = received or {}
        # A server in a PID namespace of its own sends the pid in the message's credentials,
        # which the kernel translates into our namespace; its own number would name another
        # process here.
        pid = sender_pid if message.get("pid_in_credentials") is True else message.get("pid")
        if type(pid) is not int or pid <= 0:
            refused = message.get("refused")
            if isinstance(refused, str):
                self._unusable(f"refused to fork: {refused[:300]}")
            elif received is None:
                self._unusable(f"did not answer within {START_TIMEOUT_S:g} s")
                if self.spawned == 0:
                    # Still starting: it must not fork a worker on these pipes later, beside the
                    # fresh worker the caller now starts. No worker of its own runs yet.
                    self.proc.kill()
            else:
                self._unusable(self._gone())
            mine.close()
            worker.stdout.close()
            return None
        worker.pid = pid
        worker.namespace_init = message.get("init") is True
        with self.lock:
            self.spawned += 1
        return worker

    def _gone(self) -> str:
        """Why a request got no pid: the server ended, or it is there but could not fork."""
        code = self.proc.poll()
        if code is None:
            return "could not fork a worker"
        return f"ended ({f'killed by signal {-code}' if code < 0 else f'exit code {code}'})"

    def close(self) -> None:
        """Stop the server; it kills the process group of every worker still running."""
        self.closed = True
        self.usable = False
        if self.spawned == 0:
            self.proc.kill()  # never used (a usage error, all results cached): no need to wait for its start
        try:
            self.control.close()
        except OSError:
            pass
        if not _exits_within(self.proc, 5.0):
            self.proc.kill()
        self.proc.wait()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


FORK_SERVER_LAYER = "fork-server"  # the entry a framework worker's report adds to its sandbox layers


class ForkServers:
    """The fork servers of one run, one per framework: NumPy's, given (the CLI starts it first
    thing), and torch's or JAX's, each started when the first submission of that framework asks
    for a worker, so a run without one never starts it. Thread-safe; ``close`` stops them all.

    ``frameworks=False`` starts none: framework workers are then forked from the NumPy server
    and import their framework themselves (a caller that handed over a single server)."""

    def __init__(self, numpy_server: ForkServer | None, *, frameworks: bool = True, own_namespaces: bool = False) -> None:
        self.numpy = numpy_server
        self.frameworks = frameworks
        self.own_namespaces = own_namespaces
        self.started: dict[str, ForkServer] = {}  # the framework servers started so far
        self.unavailable: dict[str, str] = {}  # framework -> why it has no server
        self.fallbacks: dict[str, str] = {}  # framework -> why its first unforked worker was not forked
        self.lock = threading.Lock()
        self.closed = False

    @classmethod
    def of(cls, server: ForkServer) -> ForkServers:
        """One server as the servers of a run that starts no other: NumPy's (framework workers
        forked from it import their framework) or a framework's (the others start fresh). The
        caller closes it."""
        if server.framework == "numpy":
            return cls(server, frameworks=False)
        servers = cls(None, frameworks=False)
        servers.started[server.framework] = server
        return servers

    @classmethod
    def start(cls, own_namespaces: bool = False) -> ForkServers:
        """The servers of a run, NumPy's started now (it warms up in the background)."""
        return cls(ForkServer.start(own_namespaces), own_namespaces=own_namespaces)

    def _server(self, framework: str) -> tuple[ForkServer | None, str]:
        """The server of ``framework``, started on the first call; or None and why there is none."""
        # Here, not at the top: grader.frameworks imports numpy, which the fork server's boot
        # (this module) must not import before its namespaces are made (see serve).
        from grader.frameworks import FRAMEWORKS

        with self.lock:
            if self.closed:
                raise SandboxError("grading was stopped")
            server = self.started.get(framework)
            if server is None and framework not in self.unavailable:
                if not self.frameworks:
                    why = f"this run has no {framework} server"
                elif framework not in FRAMEWORKS:
                    why = f"no fork server serves {framework!r}"
                else:
                    server = ForkServer.start(self.own_namespaces, framework)
                    why = f"no {framework} server could be started (no SOCK_SEQPACKET or descriptor passing here, or no process to spare)"
                if server is None:
                    self.unavailable[framework] = why
                else:
                    self.started[framework] = server
        return server, self.unavailable.get(framework, "")

    def spawn(self, framework: str, req_r: int, res_w: int, workdir: str, env: dict[str, str]) -> tuple[ForkedWorker | None, Layer | None]:
        """A worker for a submission of ``framework`` (ForkServer.spawn; None: start a fresh one)
        and, for torch and JAX, the report's entry saying whether it was forked with its
        framework imported, or why not. Raises SandboxError once closed (grading stops)."""
        if framework == "numpy":
            if self.closed:
                raise SandboxError("grading was stopped")
            return (self.numpy.spawn(req_r, res_w, workdir, env) if self.numpy is not None else None), None
        server, why = self._server(framework)
        if server is not None:
            worker = server.spawn(req_r, res_w, workdir, env)
            if worker is not None:
                return worker, Layer(FORK_SERVER_LAYER, True, f"forked from the {framework} server, which imported {framework} once and had one thread at the fork")
            why = f"the {framework} server {server.why_not or 'could not fork a worker'}"
        worker = self.numpy.spawn(req_r, res_w, workdir, env) if self.numpy is not None else None
        with self.lock:
            self.fallbacks.setdefault(framework, why)
        return worker, unforked(framework, why, worker is not None)

    def notes(self) -> list[str]:
        """One line per framework whose workers were not all forked from its server."""
        return [
            f"{framework} submissions were not forked from a {framework} server ({why}): each worker imported {framework} itself, "
            "which is slower; the isolation is the same"
            for framework, why in sorted(self.fallbacks.items())
        ]

    def close(self) -> None:
        """Stop every server (each kills the workers it forked that still run)."""
        with self.lock:
            self.closed = True
            servers = [*([self.numpy] if self.numpy is not None else []), *self.started.values()]
        for server in servers:
            server.close()

    def __enter__(self) -> ForkServers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def unforked(framework: str, why: str, from_numpy_server: bool) -> Layer:
    """The report's entry for a torch or JAX worker not forked from its framework's server."""
    how = "forked from the NumPy server" if from_numpy_server else "a fresh interpreter"
    return Layer(FORK_SERVER_LAYER, False, f"{framework} imported in this worker ({how}): {why}")


# --------------------------------------------------------------------------------------------
# The server's side (runs in its own fresh interpreter)


def serve(control_fd: int, own_namespaces: bool = False, framework: str = "numpy") -> None:
    # Workers forked straight into PID namespaces of their own (see isolation.NamespaceForks):
    # where this process is privileged, from here; otherwise from the PID 1 of a user and PID
    # namespace of our own, which carries on as the server (this process then only waits).
    # Done before numpy's import: the processes that stay behind are small.
    forks = None if own_namespaces else NamespaceForks.open()
    displaced = False
    if forks is None:
        forks = NamespaceForks.behind_user_namespace()
        displaced = forks is not None  # our pids are not the grader's any more

    # numpy (through the worker's module) only now, after that fork: the process left behind
    # to wait stays small. numpy is the point of the server: imported once, inherited by every
    # child.
    import numpy  # noqa: F401
    from grader.sandbox import worker

    # A framework server imports its framework too, without running any of it (no thread may be
    # alive at a fork); whatever stops it is the answer to every request.
    refusal = _preloaded(framework)

    # Everything imported so far is shared with every child, copy-on-write. A garbage collection
    # in a child would touch (and so copy) every page of it: frozen objects are never scanned.
    # The collector was off during the imports (SERVER_BOOT), which free almost nothing: a run of
    # it then, or before freezing, would only delay the server's first fork. The workers, which
    # run the submissions, collect as usual.
    gc.freeze()
    gc.enable()
    control = socket.socket(fileno=control_fd)
    # Only this process holds the write end: a child that finds the read end at end-of-file was
    # forked by a server that died before the child's parent-death signal was set.
    alive = os.pipe()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    replies: dict[int, socket.socket] = {}
    while True:
        for key, _ in selector.select():
            if key.fileobj is control:
                try:
                    data, fds, _flags, _addr = socket.recv_fds(control, MESSAGE_BYTES, 8)
                except OSError:
                    data, fds = b"", []
                if not data:  # the grader is gone: take every worker with us
                    for pid in replies:
                        _kill_group(pid)
                    os._exit(0)
                _spawn(worker.entry, data, fds, replies, control, forks, alive, displaced, refusal or _threads_alive(framework))
            else:
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
        _reap(replies)


def _preloaded(framework: str) -> str | None:
    """Import ``framework`` as every worker of this server will have it (grader.frameworks
    .preload); None when done, else why this server must not fork."""
    if framework == "numpy":
        return None
    from grader.frameworks import FRAMEWORKS, preload

    if framework not in FRAMEWORKS:
        return f"no fork server serves {framework!r}"
    try:
        preload(framework, ahead=True)
    except BaseException as exc:  # noqa: BLE001 - a broken install: its workers try (and say) it themselves
        return f"importing {framework} failed: {type(exc).__name__}: {exc}"
    return None


def _threads_alive(framework: str) -> str | None:
    """Why forking now would be unsafe: more than one thread in this process. A child has only
    the thread that forked; the others' state (a lock held, a pool's bookkeeping) would be
    copied without them, and the layers that need a single thread could not trust the count.
    Asked before every fork, as the server has no way to know that nothing started one."""
    threads = _thread_count()
    if threads <= 1:
        return None
    return f"{threads} threads alive in the server after importing {framework}"


def _reap(replies: dict[int, socket.socket]) -> None:
    while replies:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _kill_group(pid)  # whatever the worker left behind in its group
        reply = replies.pop(pid, None)
        if reply is not None:
            _send_json(reply, {"status": status, "max_rss_kb": int(usage.ru_maxrss), "cpu_s": usage.ru_utime + usage.ru_stime})
            reply.close()


def _spawn(entry: Any, data: bytes, fds: list[int], replies: dict[int, socket.socket], control: socket.socket, forks: NamespaceForks | None, alive: tuple[int, int], displaced: bool = False, refusal: str | None = None) -> None:
    try:
        request = json.loads(data)
        workdir, env = request["workdir"], request["env"]
        valid = len(fds) == 4 and isinstance(workdir, str) and isinstance(env, dict) and all(isinstance(v, str) for v in env.values())
    except (ValueError, KeyError, TypeError):
        valid = False
    if not valid:
        for fd in fds:
            os.close(fd)
        return

    req_r, res_w, out_w, reply_fd = fds
    reply = socket.socket(fileno=reply_fd)
    if refusal is not None:  # no fork: the grader starts a fresh worker, and says why
        for fd in (req_r, res_w, out_w):
            os.close(fd)
        _send_json(reply, {"refused": refusal})
        reply.close()
        return
    init = False
    try:
        if forks is not None:
            try:
                pid, init = forks.fork(), True
            except OSError:  # no namespace this time (a limit reached): the worker makes its own
                pid = os.fork()
        else:
            pid = os.fork()
    except (OSError, NamespaceStuck) as exc:
        # Out of processes or memory: no pid sent, the grader starts a fresh worker. Stuck in a
        # child's namespace: forking on would put workers together, so the server ends (the
        # grader then starts fresh workers).
        for fd in (req_r, res_w, out_w):
            os.close(fd)
        reply.close()
        if isinstance(exc, NamespaceStuck):
            os._exit(1)
        return
    if pid == 0:
        _child(entry, req_r, res_w, out_w, workdir, env, [reply, control, *replies.values()], alive)
    for fd in (req_r, res_w, out_w):
        os.close(fd)
    replies[pid] = reply
    if not displaced:
        _send_json(reply, {"pid": pid, "init": init})
        return
    try:
        # Our pid numbers are our namespace's: the kernel translates the one in the credentials.
        reply.sendmsg([json.dumps({"pid_in_credentials": True, "init": init}).encode()], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, CREDENTIALS.pack(pid, os.getuid(), os.getgid()))])
    except OSError:
        _kill_group(pid)  # a worker the grader cannot name: it never runs (reaped as usual)
        _send_json(reply, {"pid": None})


def _child(entry: Any, req_r: int, res_w: int, out_w: int, workdir: str, env: dict[str, str], sockets: list[socket.socket], alive: tuple[int, int]) -> None:
    """Become what a fresh worker is, then run the same worker code. Never returns."""

    try:
        # Dies with the server (which ends every worker when the grader goes), even when the
        # server died just before this line.
        set_parent_death_signal()
        os.close(alive[1])
        if select.select([alive[0]], [], [], 0)[0]:
            os._exit(70)
        os.setsid()  # its own session and process group: one killpg ends it and its children
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for sock in sockets:
            sock.detach()  # the descriptors are closed below; no object may close a reused number
        os.chdir(workdir)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        close_descriptors_except(req_r, res_w)
        os.environ.clear()
        os.environ.update(env)
        if "tempfile" in sys.modules:
            setattr(sys.modules["tempfile"], "tempdir", None)  # computed again from TMPDIR
        sys.argv = ["-c", str(req_r), str(res_w)]
        entry([str(req_r), str(res_w)])
    finally:
        os._exit(70)
