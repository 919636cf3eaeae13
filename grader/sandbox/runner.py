"""Start a worker for one submission, feed it the probes, collect its observations.

The grader's side of the sandbox. It enforces what the worker cannot be trusted to enforce on
itself: the wall-clock deadline (the whole process group is killed when it passes), the size of
what the submission prints (the start is kept, the rest counted), and the size and form of the
results (framed, capped, validated). Reading never blocks past the deadline.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections import deque
import os
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from contextlib import AbstractContextManager
from typing import Any

from grader.errors import SandboxError, SandboxUnavailable
from grader.observation import (
    CapturedOutput,
    LoadInfo,
    MalformedMessage,
    Observation,
    WorkerRun,
    WorkerStatus,
    parse_load,
    parse_result,
    parse_sandbox,
)
from grader.probes import Probe
from grader.sandbox.env import BASE_ENV, IMPORT_BOOT, PACKAGE_ROOT
from grader.sandbox.forkserver import EXIT_GRACE_S, ForkedWorker, ForkServer, ForkServers, unforked
from grader.sandbox.isolation import Layer, missing_guarantees, why_missing
from grader.sandbox.policy import SandboxSettings, request_meta
from grader.sandbox.protocol import EncodedArrays, ProtocolError, decode, encode, encode_arrays

# BASE_ENV, IMPORT_BOOT and PACKAGE_ROOT live in env.py, which the fork server shares without
# importing numpy. IMPORT_BOOT takes PACKAGE_ROOT off argv and sets the import path first.
WORKER_BOOT = IMPORT_BOOT + "from grader.sandbox.worker import entry; entry(sys.argv[1:])"


@dataclass(frozen=True)
class WorkerLimits:
    """The limits the grader enforces on one worker."""

    timeout_s: float = 10.0
    memory_mb: int = 1024
    output_bytes: int = 64 * 1024
    result_bytes: int = 256 * 1024 * 1024
    file_bytes: int = 64 * 1024 * 1024
    # Time to import torch / jax before the submission's own clock starts (at "ready").
    startup_s: float = 0.0


# The probes' arrays as laid out for the last probes seen: every submission of a run gets the same
# inputs, so a batch lays them out once. Probes are frozen; holding them keeps their ids unique.
_LAID_OUT: list[tuple[tuple[Probe, ...], EncodedArrays]] = []
_LAID_OUT_LOCK = threading.Lock()


def _probe_arrays(probes: list[Probe]) -> EncodedArrays:
    with _LAID_OUT_LOCK:
        if _LAID_OUT and len(_LAID_OUT[0][0]) == len(probes) and all(a is b for a, b in zip(_LAID_OUT[0][0], probes)):
            return _LAID_OUT[0][1]
    arrays = {}
    for probe in probes:
        arrays[f"{probe.name}.Q"] = probe.Q
        arrays[f"{probe.name}.K"] = probe.K
        arrays[f"{probe.name}.V"] = probe.V
        if probe.mask is not None:  # Masked probes
            arrays[f"{probe.name}.mask"] = probe.mask
        if probe.G is not None:  # Gradient probes: the weights of sum(output * G)
            arrays[f"{probe.name}.G"] = probe.G
    laid_out = encode_arrays(arrays)
    with _LAID_OUT_LOCK:
        _LAID_OUT[:] = [(tuple(probes), laid_out)]
    return laid_out


def build_request(submission: Path, function: str, probes: list[Probe], limits: WorkerLimits, sandbox: dict[str, Any], how: dict[str, Any] | None = None) -> bytes:
    meta = {
        "submission": str(submission),
        "function": function,
        "probes": [{"name": p.name, "repeat": p.repeat, "return_inputs": p.return_inputs, "gradients": p.gradients} for p in probes],
        "limits": {
            "memory_bytes": limits.memory_mb * 1024 * 1024,
            "cpu_seconds": int(limits.timeout_s) + 2,
            "file_bytes": limits.file_bytes,
        },
        "sandbox": sandbox,
        **(how or {}),  # "framework" and the load "plan" (notebook source, package module)
    }
    return encode(meta, _probe_arrays(probes))


class _OutputSink:
    """Keeps the first ``cap`` bytes of what the submission prints and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.cap - len(self.kept)
        if room > 0:
            self.kept += data[:room]

    def result(self) -> CapturedOutput:
        return CapturedOutput(self.kept.decode("utf-8", errors="replace"), self.total, len(self.kept))


class _ResultStream:
    """Splits the result pipe into frames, refusing anything over the cap.

    Each frame's body grows in a buffer of its own as its bytes arrive and is decoded in place
    (the arrays are views of it), so a frame costs about its size once, never a copy per step;
    a length prefix that promises a huge frame costs nothing until its bytes come. A problem in
    the stream is raised only after the good frames before it are taken (the worker's own, then
    junk the submission wrote)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.received = 0
        self.prefix = bytearray()
        self.length: int | None = None  # of the frame being filled
        self.body = bytearray()
        self.complete: deque[bytearray] = deque()
        self.problem: ProtocolError | None = None

    def feed(self, data: bytes) -> None:
        if self.problem is not None:
            return
        self.received += len(data)
        if self.received > self.cap:
            self.problem = ProtocolError(f"the worker sent more than {self.cap} bytes of results")
            return
        view = memoryview(data)
        while view:
            if self.length is None:
                need = 4 - len(self.prefix)
                self.prefix += view[:need]
                view = view[need:]
                if len(self.prefix) < 4:
                    return
                (length,) = struct.unpack("<I", self.prefix)
                self.prefix.clear()
                if length > self.cap:
                    self.problem = ProtocolError("frame larger than the result cap")
                    return
                self.length = length
            take = self.length - len(self.body)
            self.body += view[:take]
            view = view[take:]
            if len(self.body) == self.length:
                self.complete.append(self.body)
                self.body, self.length = bytearray(), None

    def next_frame(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The next complete frame, or None when none is complete yet; one at a time."""
        if self.complete:
            return decode(self.complete.popleft(), copy=False)
        if self.problem is not None:
            raise self.problem
        return None


# A pipe holds 64 KiB unless asked for more. Sized to hold the whole request (about 230 KiB of probe
# arrays), the request is written in one go with no thread to feed it; sized for the usual
# results, the worker never waits for this process to read them. In a batch both waits were for
# the interpreter lock, which a judging thread holds for up to a switch interval at a time.
PIPE_MAX_BYTES = 1 << 20  # the kernel's default ceiling for an unprivileged user
RESULT_PIPE_BYTES = 1 << 18


def _grow_pipe(fd: int, size: int) -> int:
    """Ask for a pipe buffer of at least ``size`` bytes and return the size the pipe has. Best
    effort: where the kernel refuses (the user's pipe budget is spent, another system), the pipe
    keeps its size and the caller copes with that."""
    try:
        return int(fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, min(max(size, 1), PIPE_MAX_BYTES)))
    except (AttributeError, OSError):
        try:
            return int(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))
        except (AttributeError, OSError):
            return 0


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _writer(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass  # the worker died before reading its request; its exit status tells why
    finally:
        os.close(fd)


def _exits_by(pid: int, deadline: float) -> bool:
    """Whether our child ``pid`` has exited (not yet reaped) by ``deadline``."""
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


def _stop(pid: int, graceful: bool = True) -> None:
    """End a worker: SIGTERM first, to the process we started only, which then kills the isolated
    worker it supervises and, without a PID namespace, sweeps what that left (a setsid escaper
    included); then SIGKILL to the whole group, whatever happened. A worker the fork server
    made PID 1 of its own namespace has no supervisor (``graceful=False``): SIGKILL at once."""
    if not graceful:
        _kill_group(pid)
        return
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and _running(pid):
            time.sleep(0.005)
    except ProcessLookupError:
        pass
    _kill_group(pid)


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs: our child not yet exited, or (a worker the fork server forked,
    which is not ours to wait for) a process that is neither gone nor a zombie."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                return handle.read().rsplit(")", 1)[1].split()[0] not in "ZX"
        except (OSError, IndexError):
            return False


def run_submission(
    submission: Path,
    function: str,
    probes: list[Probe],
    limits: WorkerLimits,
    sandbox: SandboxSettings | None = None,
    how: dict[str, Any] | None = None,
    *,
    forkserver: ForkServer | ForkServers | None = None,
    slot: AbstractContextManager[Any] | None = None,
    alone: bool = False,
) -> WorkerRun:
    """Run one submission on ``probes`` in a fresh worker process (forked by ``forkserver`` when
    given and working: the server of the submission's framework, ``how["framework"]``, where
    the run's ForkServers has one, else the NumPy server; see forkserver.py); ``slot`` (a
    semaphore) is held while the worker lives. Raises SandboxError only when the
    worker cannot be started at all, and
    SandboxUnavailable in strict mode when the worker lacked a guarantee (it then never loaded
    the submission); everything the submission does is in the WorkerRun. ``alone`` (a loose
    file of a batch) lets the worker read the file but not the folder it lies in."""
    sandbox = sandbox or SandboxSettings()
    workdir = tempfile.mkdtemp(prefix="grader-work-")
    resolved = submission.resolve()
    plan = (how or {}).get("plan") or {}
    folders = tuple(str(f) for f in [plan.get("root"), *(plan.get("sys_path") or [])] if isinstance(f, str) and f)
    root = Path(plan["root"]) if isinstance(plan.get("root"), str) and plan["root"] else resolved.parent
    request = build_request(resolved, function, probes, limits, request_meta(resolved, workdir, sandbox, folders, root, alone), how)
    try:
        try:
            pipes = _Pipes(request)
        except OSError as exc:  # out of descriptors
            raise SandboxError(f"cannot start the worker: {exc}") from None
        try:
            # The slot bounds the workers running at once (a batch's --jobs): taken only now that
            # the request is in its pipe, and given back once the worker is reaped. In a batch
            # every step after the slot waits for the interpreter lock (the other threads judge
            # meanwhile), so nothing that can be done before it is left after it.
            with slot if slot is not None else contextlib.nullcontext():
                run = _start_and_collect(pipes, workdir, limits, forkserver, str((how or {}).get("framework") or "numpy"))
        finally:
            pipes.close()
    finally:
        remove_workdir(workdir)
    if sandbox.strict and missing_guarantees(run.sandbox):
        raise SandboxUnavailable(f"--strict-sandbox: the worker for {submission} lacked {why_missing(run.sandbox)}; it was not loaded")
    if run.status != "completed":
        # The first probe with no observation is the one running when the worker stopped.
        pending = [p.name for p in probes if (p.name, 0) not in run.observations]
        run = replace(run, last_probe=pending[0] if pending and run.load is not None and run.load.ok else None)
    return run


def remove_workdir(workdir: str) -> None:
    """Remove a worker's folder whatever the submission did to its modes: a folder it made
    mode 000 (or 0300: no listing) cannot be listed by an unprivileged grader, and rmtree would
    leave it behind. Every folder gets its owner's rights back first, top down and never through a
    link; as root this needs nothing, as the worker's owner it is always allowed."""
    stack = [workdir]
    while stack:
        folder = stack.pop()
        try:
            os.chmod(folder, 0o700)
            entries = list(os.scandir(folder))
        except OSError:
            continue
        stack += [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
    shutil.rmtree(workdir, ignore_errors=True)


class _Pipes:
    """The worker's request and result pipes, with the request already in its pipe where the
    pipe could be grown to hold it whole (the worker then finds it waiting; otherwise a thread
    feeds it once the worker runs). ``close`` closes whatever is still open here."""

    def __init__(self, request: bytes) -> None:
        self.req_r, self.req_w = os.pipe()
        try:
            self.res_r, self.res_w = os.pipe()
        except OSError:
            os.close(self.req_r)
            os.close(self.req_w)
            raise
        self.open = {self.req_r, self.req_w, self.res_r, self.res_w}
        self.pending: bytes | None = request
        _grow_pipe(self.res_w, RESULT_PIPE_BYTES)
        if _grow_pipe(self.req_w, len(request)) >= len(request):
            self.pending = None
            self.open.discard(self.req_w)
            _writer(self.req_w, request)  # one write the pipe has room for: it cannot block

    def handed_over(self) -> None:
        """The worker holds its ends now: ours are closed, and the request fed if it was not."""
        for fd in (self.req_r, self.res_w):
            self.open.discard(fd)
            os.close(fd)
        if self.pending is not None:
            self.open.discard(self.req_w)
            threading.Thread(target=_writer, args=(self.req_w, self.pending), daemon=True).start()

    def close(self) -> None:
        while self.open:
            os.close(self.open.pop())


def _start_and_collect(pipes: _Pipes, workdir: str, limits: WorkerLimits, forkserver: ForkServer | ForkServers | None, framework: str = "numpy") -> WorkerRun:
    """Start the worker (forked, or a fresh interpreter) on ``pipes`` and collect its run;
    whatever happens, its process group is killed before this returns."""
    env = {**BASE_ENV, "HOME": workdir, "TMPDIR": workdir}
    # From here this thread waits: for the fork server (still importing numpy, or torch or JAX
    # for the first submission of a framework), then for the worker. The caller's own work may
    # run meanwhile.
    servers = ForkServers.of(forkserver) if isinstance(forkserver, ForkServer) else forkserver
    try:
        proc: subprocess.Popen[bytes] | ForkedWorker | None = None
        start = None if framework == "numpy" else unforked(framework, "no fork server in this run", False)
        if servers is not None:
            proc, start = servers.spawn(framework, pipes.req_r, pipes.res_w, workdir, env)
        started = time.monotonic()  # after the fork server's own start-up, which is not the submission's time
        proc = proc or subprocess.Popen(
            [sys.executable, "-I", "-c", WORKER_BOOT, PACKAGE_ROOT, str(pipes.req_r), str(pipes.res_w)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env=env,
            pass_fds=(pipes.req_r, pipes.res_w),
            start_new_session=True,  # its own process group: one killpg ends it and its children
        )
    except (OSError, SandboxError) as exc:
        raise SandboxError(f"cannot start the worker: {exc}") from None
    pipes.handed_over()
    try:
        run = _collect(proc, pipes.res_r, limits, started)
    finally:
        _kill_group(proc.pid)
    # How a torch or JAX worker started, after the layers the worker reported (when it did).
    return replace(run, sandbox=(*run.sandbox, start)) if start is not None and run.sandbox else run


def _collect(proc: subprocess.Popen[bytes] | ForkedWorker, res_fd: int, limits: WorkerLimits, started: float) -> WorkerRun:
    assert proc.stdout is not None
    deadline = started + limits.timeout_s + limits.startup_s
    ready = False
    sink = _OutputSink(limits.output_bytes)
    stream = _ResultStream(limits.result_bytes)
    load: LoadInfo | None = None
    sandbox: tuple[Layer, ...] | None = None
    observations: dict[tuple[str, int], Observation] = {}
    done = False
    status: WorkerStatus | None = None
    detail = ""
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, "out")
    selector.register(res_fd, selectors.EVENT_READ, "res")
    open_streams = 2
    try:
        while open_streams:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                status, detail = "timeout", f"no result within {limits.timeout_s:g} s"
                break
            for key, _ in selector.select(timeout=min(remaining, 0.5)):
                fd = key.fileobj if isinstance(key.fileobj, int) else key.fileobj.fileno()
                data = os.read(fd, 1 << 16)
                if not data:
                    selector.unregister(key.fileobj)
                    open_streams -= 1
                    continue
                if key.data == "out":
                    sink.feed(data)
                    continue
                try:
                    stream.feed(data)
                    while (frame := stream.next_frame()) is not None:
                        meta, arrays = frame
                        kind = meta.get("kind")
                        if kind == "sandbox":
                            # Only the worker's own report, sent before the submission runs.
                            if sandbox is not None or load is not None:
                                raise MalformedMessage("a second sandbox report")
                            sandbox = parse_sandbox(meta)
                        elif kind == "ready":
                            # The framework is imported; the submission's clock starts now. Accepted
                            # once, before loading, and only when a framework was asked for, so a
                            # submission cannot forge it to win more time.
                            if ready or load is not None or not limits.startup_s:
                                raise MalformedMessage("unexpected ready message")
                            ready = True
                            deadline = time.monotonic() + limits.timeout_s
                        elif kind == "loaded":
                            load = parse_load(meta)
                        elif kind == "result":
                            obs = parse_result(meta, arrays)
                            observations[(obs.probe, obs.call)] = obs
                        elif kind == "done":
                            done = True
                        else:
                            raise MalformedMessage(f"unknown message kind {str(kind)[:40]!r}")
                except (ProtocolError, MalformedMessage, KeyError) as exc:
                    status, detail = "protocol-error", f"malformed result from the worker: {exc}"
                    break
            if status is not None:
                break
    finally:
        selector.close()
    if status is None and isinstance(proc, subprocess.Popen) and not _exits_by(proc.pid, deadline + EXIT_GRACE_S):
        # Its pipes are closed but it lives on (a submission that closed every descriptor and
        # sleeps): never wait for it past the deadline.
        status, detail = "timeout", f"no result within {limits.timeout_s:g} s (the worker closed its pipes and kept running)"
    if status is not None:
        _stop(proc.pid, graceful=not (isinstance(proc, ForkedWorker) and proc.namespace_init))
    exit_code, signum, max_rss, cpu_s = _reap(proc)
    duration = time.monotonic() - started
    if status is None:
        if done and exit_code == 0:
            status = "completed"
        elif signum == signal.SIGXCPU or signum == signal.SIGKILL and cpu_s >= int(limits.timeout_s) + 2:
            # The CPU limit is set soft = hard, so the kernel sends SIGKILL; a submission running
            # threads spends CPU time faster than wall-clock time and can reach it first.
            status, detail = "timeout", f"CPU time limit reached ({cpu_s:.1f} s of CPU)"
        elif _looks_like_memory(max_rss, limits, signum, observations, load):
            status, detail = "memory", f"the worker died near the memory limit ({max_rss // 1024} MB resident)"
        else:
            status = "crashed"
            detail = f"the worker was killed by signal {signal.Signals(signum).name}" if signum else f"the worker exited with code {exit_code} before reporting"
    return WorkerRun(
        status=status,
        load=load,
        observations=observations,
        output=sink.result(),
        duration_s=duration,
        exit_code=exit_code,
        signal=signum,
        max_rss_kb=max_rss,
        detail=detail,
        last_probe=None,
        sandbox=sandbox or (),
    )


def _reap(proc: subprocess.Popen[bytes] | ForkedWorker) -> tuple[int | None, int | None, int, float]:
    """Wait for the worker (it was killed if need be) and read its exit status, peak memory and
    CPU time (both include the isolated worker it waited for)."""
    if isinstance(proc, ForkedWorker):
        return proc.reap()  # the fork server is its parent and reports how it ended
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:
        proc.wait()
        code = proc.returncode
        return (code, None, 0, 0.0) if code is None or code >= 0 else (None, -code, 0, 0.0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status), int(usage.ru_maxrss), cpu
    return os.WEXITSTATUS(status), None, int(usage.ru_maxrss), cpu


def _looks_like_memory(max_rss_kb: int, limits: WorkerLimits, signum: int | None, observations: dict[tuple[str, int], Observation], load: LoadInfo | None) -> bool:
    # An allocation that fails inside C code aborts or kills the process instead of raising
    # MemoryError; a peak near the limit tells that case apart from an ordinary crash.
    return max_rss_kb * 1024 >= 0.8 * limits.memory_mb * 1024 * 1024 or signum == signal.SIGKILL and max_rss_kb * 1024 >= 0.5 * limits.memory_mb * 1024 * 1024
