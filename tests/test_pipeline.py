"""How a run is laid out for speed, asserted as behaviour (speed itself is measured by
benchmarks/throughput.py): workers bounded by --jobs while judging overlaps them, the probes'
arrays laid out once per run, the fork server started only for a run that grades."""

from __future__ import annotations

import ctypes
import io
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import grader.pipeline as pipeline
from conftest import EXAMPLES, ROOT
from grader.api import Prepared, grade_file, prepare
from grader.discover import Submission
from grader.report.base import RunInfo
from grader.report.text import text_reporter
from grader.sandbox.forkserver import SERVER_BOOT, ForkServer
from grader.sandbox.protocol import decode
from grader.sandbox import runner
from grader.sandbox.runner import WorkerLimits, build_request
from grader.slots import Slots


def _submission(path: Path) -> Submission:
    return Submission(label=str(path), file=path, folder=None, error=None)


def test_no_more_workers_than_jobs_and_judging_overlaps(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """At most --jobs submissions are observed at once; a submission being judged holds no slot."""
    lock = threading.Lock()
    observing = judging = 0
    most_observing = 0
    overlapped = threading.Event()
    prepared = prepare()
    real = pipeline.grade_one(_submission(EXAMPLES / "correct.py"), prepared, None)[0]

    def fake_observe(path: Path, prepared: object, root: object = None, *, slot: Any, **_: object) -> Path:
        nonlocal observing, most_observing
        with slot:  # what run_submission does around the worker's life
            with lock:
                observing += 1
                most_observing = max(most_observing, observing)
                if judging and observing == 2:  # both slots busy while a third submission is judged
                    overlapped.set()
            time.sleep(0.02)
            with lock:
                observing -= 1
        return path

    def fake_judge(observed: Path, prepared: object) -> object:
        nonlocal judging
        with lock:
            judging += 1
        time.sleep(0.03)
        with lock:
            judging -= 1
        return replace(real, path=str(observed))

    monkeypatch.setattr(pipeline, "observe", fake_observe)
    monkeypatch.setattr(pipeline, "judge", fake_judge)
    files = []
    for i in range(12):
        files.append(tmp_path / f"s{i}.py")
        files[-1].write_text(f"# {i}\n")
    results = dict(pipeline.run([_submission(f) for f in files], prepared, jobs=2))
    assert sorted(results) == list(range(12))
    assert [results[i].path for i in range(12)] == [str(f) for f in files]
    assert most_observing == 2
    assert overlapped.is_set()  # judging holds no slot


def test_probe_arrays_are_laid_out_once_and_match_the_probes(tmp_path: Path) -> None:
    prepared = prepare()
    sandbox: dict[str, object] = {}
    first = build_request(tmp_path / "a.py", "attention", prepared.probes, WorkerLimits(), sandbox)
    second = build_request(tmp_path / "b.py", "attention", prepared.probes, WorkerLimits(), sandbox)
    meta_a, arrays_a = decode(first[4:])
    meta_b, arrays_b = decode(second[4:])
    assert meta_a["submission"].endswith("a.py") and meta_b["submission"].endswith("b.py")
    for probe in prepared.probes:
        assert np.array_equal(arrays_a[f"{probe.name}.Q"], probe.Q) and np.array_equal(arrays_b[f"{probe.name}.V"], probe.V)
    # Other probes (a new run) get their own arrays, never the previous run's.
    changed = [replace(p, Q=p.Q + 1.0) if i == 0 else p for i, p in enumerate(prepared.probes)]
    _, arrays_c = decode(build_request(tmp_path / "a.py", "attention", changed, WorkerLimits(), sandbox)[4:])
    name = prepared.probes[0].name
    assert np.array_equal(arrays_c[f"{name}.Q"], prepared.probes[0].Q + 1.0)


def test_commands_without_grading_leave_no_fork_server_behind(tmp_path: Path) -> None:
    """Usage errors (one click refuses before the command runs, one the command finds once its
    fork server is starting): no server is left when the process ends."""
    result, left = _grade_and_leftovers(["--jobs", "0", str(tmp_path / "sub.py")])
    assert result.returncode == 2 and "--jobs" in result.stderr
    assert not left
    result, left = _grade_and_leftovers([str(tmp_path / "missing.py")])
    assert result.returncode == 2 and "no such file" in result.stderr
    # At once: a server left running would end by itself too, once it finished starting and
    # saw its grader gone; this asserts that `grade` ended it before exiting.
    assert not left


def _fork_servers(parent: int) -> set[int]:
    """The fork servers of this checkout whose parent is the process ``parent``."""
    found = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
            ppid = int((cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and SERVER_BOOT.encode() in args and str(ROOT).encode() in args:
            found.add(int(cmdline.parent.name))
    return found


PR_SET_CHILD_SUBREAPER = 36


def _grade_and_leftovers(args: list[str]) -> tuple[subprocess.CompletedProcess[str], set[int]]:
    """Run `grade` and say which fork servers it left running (they are killed). Only its own
    count, whatever else runs on the machine: while it runs, this process is the subreaper of
    its descendants (prctl(2)), so a server orphaned when `grade` exits becomes our child before
    `grade`'s exit is reported to us."""
    libc = ctypes.CDLL(None, use_errno=True)
    ours = _fork_servers(os.getpid())  # a fixture's, say
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        pytest.skip(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")
    try:
        result = subprocess.run([sys.executable, "-m", "grader", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
        left = _fork_servers(os.getpid()) - ours
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return result, left


def test_the_leftover_check_finds_a_running_server(prepared: Prepared) -> None:
    server = ForkServer.start()
    assert server is not None
    with server:
        # Once it has forked a worker the server runs its own command line (right after the
        # start, /proc may still show this process's, from before the exec).
        assert grade_file(EXAMPLES / "correct.py", prepared, forkserver=server).passed
        assert server.spawned == 1
        assert server.proc.pid in _fork_servers(os.getpid())


def test_request_pipes_are_sized_to_hold_a_request() -> None:
    read_end, write_end = os.pipe()
    try:
        assert runner._grow_pipe(write_end, 300_000) >= 300_000
        # Best effort: past the ceiling the pipe keeps a size of its own, and says which.
        assert runner._grow_pipe(write_end, 1 << 40) >= 300_000
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_request_larger_than_its_pipe_is_fed_by_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernel refuses to grow the pipe, the request still reaches the worker whole."""
    monkeypatch.setattr(runner, "_grow_pipe", lambda fd, size: 0)
    prepared = prepare()
    report = pipeline.grade_one(_submission(EXAMPLES / "correct.py"), prepared, None)[0]
    assert report.passed and report.worker_status == "completed"


def test_the_request_is_in_its_pipe_before_the_fork_server_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole request is in its pipe before the fork server is asked (early in a cold run it
    may still be importing numpy): the worker never waits for it."""
    import fcntl
    import termios

    seen: list[tuple[str, int]] = []
    real_spawn = ForkServer.spawn

    def spawn(self: ForkServer, req_r: int, *args: Any) -> Any:
        waiting = bytearray(4)
        fcntl.ioctl(req_r, termios.FIONREAD, waiting)  # bytes in the pipe, left unread
        seen.append(("spawn", int.from_bytes(waiting, sys.byteorder)))
        return real_spawn(self, req_r, *args)

    monkeypatch.setattr(ForkServer, "spawn", spawn)
    prepared = prepare()
    request = build_request((EXAMPLES / "correct.py").resolve(), "attention", prepared.probes, prepared.limits, {}, None)
    with ForkServer.start() as server:
        run = runner.run_submission(EXAMPLES / "correct.py", "attention", prepared.probes, prepared.limits, prepared.sandbox, forkserver=server)
    assert run.status == "completed" and run.load is not None and run.load.ok
    assert [what for what, _ in seen] == ["spawn"]
    assert seen[0][1] > len(request) * 0.9  # the request, whole (its header names a temporary folder)


def test_the_request_is_in_its_pipe_before_the_slot_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a batch, every step after taking a slot waits on the interpreter lock: the pipes are
    made and the request written before, and the slot is given back once the worker is done."""
    import contextlib

    seen: list[str] = []
    real = runner._Pipes

    class Recorded(real):  # type: ignore[misc, valid-type]
        def __init__(self, request: bytes) -> None:
            super().__init__(request)
            seen.append("pipes written" if self.pending is None else "pipes")

    @contextlib.contextmanager
    def slot() -> Any:
        seen.append("slot taken")
        yield
        seen.append("slot given back")

    monkeypatch.setattr(runner, "_Pipes", Recorded)
    prepared = prepare()
    run = runner.run_submission(EXAMPLES / "correct.py", "attention", prepared.probes[:2], prepared.limits, prepared.sandbox, slot=slot())
    assert run.status == "completed"
    assert seen == ["pipes written", "slot taken", "slot given back"]


def test_a_worker_that_cannot_start_closes_each_pipe_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The request was written (and its pipe closed) before the start failed: the failure is a
    SandboxError, not an error about a descriptor closed twice."""
    from grader.errors import SandboxError

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("no more processes")

    monkeypatch.setattr(runner.subprocess, "Popen", refuse)
    before = set(os.listdir("/proc/self/fd"))
    with pytest.raises(SandboxError, match="cannot start the worker: no more processes"):
        runner.run_submission(EXAMPLES / "correct.py", "attention", prepare().probes[:1], WorkerLimits(timeout_s=10))
    assert set(os.listdir("/proc/self/fd")) <= before


def test_slots_go_out_in_submission_order_whatever_order_they_are_asked_in() -> None:
    slots = Slots(1, threading.Event())
    order: list[int] = []
    tickets = [slots.ticket(n) for n in range(4)]

    def take(n: int) -> None:
        with tickets[n]:
            order.append(n)
            time.sleep(0.01)
        tickets[n].settle()

    threads = [threading.Thread(target=take, args=(n,)) for n in (3, 2, 1)]  # the late ones ask first
    for thread in threads:
        thread.start()
        time.sleep(0.02)
    assert order == []  # ticket 0 has not been served or given up: nobody may go
    tickets[0].settle()  # submission 0 needed no worker
    for thread in threads:
        thread.join(timeout=10)
    assert order == [1, 2, 3]


def test_stopping_wakes_every_submission_waiting_for_a_slot() -> None:
    stopping = threading.Event()
    slots = Slots(1, stopping)
    errors: list[BaseException] = []
    slots.ticket(0).__enter__()  # held, never released

    def wait_for_slot() -> None:
        try:
            with slots.ticket(1):
                pass
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    waiter = threading.Thread(target=wait_for_slot)
    waiter.start()
    time.sleep(0.05)
    stopping.set()
    slots.stop()
    waiter.join(timeout=10)
    assert not waiter.is_alive() and len(errors) == 1 and "stopped" in str(errors[0])


def test_a_fitted_power_of_d_k_is_written_as_a_fraction() -> None:
    report = grade_file(Path("tests/corpus/buggy/scale-other.py"), prepare())
    out = io.StringIO()
    text_reporter(out, RunInfo("default", 10.0)).add(report)
    assert "d_k^-1/4" in out.getvalue() and "scale-other" in out.getvalue(), out.getvalue()
