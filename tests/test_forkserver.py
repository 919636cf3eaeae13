"""The fork server: a forked worker is as isolated as a fresh one, and the server never held the
references. Each hostile submission here is bounded by itself (see tests/hostile/)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import EXAMPLES, error_names
from grader.api import Prepared, grade_file
from grader.sandbox.forkserver import SERVER_BOOT, ForkServer

INTROSPECT = '''\
import os
import sys

import numpy as np

print("modules:", sorted(m for m in sys.modules if m.startswith("grader")))
print("fds:", sorted(int(fd) for fd in os.listdir("/proc/self/fd")))
print("cwd:", os.getcwd(), "home:", os.environ.get("HOME"))
print("session leader:", os.getsid(0) == os.getpid(), "group leader:", os.getpgid(0) == os.getpid())
print("env:", sorted(os.environ))


def attention(Q, K, V):
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return w / w.sum(axis=-1, keepdims=True) @ V
'''


@pytest.fixture(scope="module", params=["default", "own-namespaces"])
def server(request: pytest.FixtureRequest) -> Iterator[ForkServer]:
    """The server as it starts here and, as root, also the way it takes without privileges
    (its own user namespace, the worker pids sent in credentials)."""
    if request.param == "own-namespaces" and os.geteuid() != 0:
        pytest.skip("unprivileged already: the default server takes that way")
    started = ForkServer.start(own_namespaces=request.param == "own-namespaces")
    if started is None:
        pytest.skip("no fork server on this platform")
    with started:
        yield started


def test_forked_worker_is_isolated_and_never_saw_the_references(prepared: Prepared, server: ForkServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADER_TEST_SECRET", "s3cr3t-token")
    path = tmp_path / "introspect.py"
    path.write_text(INTROSPECT)
    before = server.spawned
    report = grade_file(path, prepared, forkserver=server)
    assert server.spawned == before + 1  # it did go through the fork server
    assert report.passed, report.output.text
    out = report.output.text
    modules = re.search(r"modules: (.*)", out)
    assert modules is not None
    # What the server imported: the worker and the wire format. No reference data, no judging code.
    for absent in ("grader.refdata", "grader.api", "grader.checks", "grader.diagnosis", "grader.probes"):
        assert absent not in modules.group(1)
    assert "grader.sandbox.worker" in modules.group(1)
    fds = re.search(r"fds: \[(.*)\]", out)
    assert fds is not None and len(fds.group(1).split(",")) <= 6  # 0-2, request, result, the listing itself
    cwd = re.search(r"cwd: (\S+) home: (\S+)", out)
    assert cwd is not None and cwd.group(1) == cwd.group(2) and "grader-work-" in cwd.group(1)
    assert "session leader: True group leader: True" in out
    assert "GRADER_TEST_SECRET" not in out


PROBE_NAMESPACES = """
from grader.sandbox import isolation
from grader.sandbox.isolation import namespaces, syscalls
if isolation.NamespaceForks.open() is None:
    namespaces._enter_user_namespace(syscalls.CLONE_NEWPID, strict=True)
print("yes")
"""


def _server_makes_namespaces() -> bool:
    """Whether a server here can fork each worker into a PID namespace of its own: privileged,
    or in a user namespace it makes (asked in a separate process, which the probe changes)."""
    done = subprocess.run([sys.executable, "-c", PROBE_NAMESPACES], capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parent.parent)
    return done.stdout.strip() == "yes"


def test_each_worker_is_the_init_of_its_own_pid_namespace(prepared: Prepared, server: ForkServer) -> None:
    """The server forks each worker straight into a new PID namespace, with no supervising
    process: privileged, from its own process, otherwise from a user namespace of its own."""
    from grader.sandbox.isolation import FORKED_AS_INIT

    report = grade_file(EXAMPLES / "correct.py", prepared, forkserver=server)
    assert report.passed
    layer = next(layer for layer in report.sandbox if layer.name == "pid-namespace")
    if not _server_makes_namespaces():
        pytest.skip(f"no namespaces for the server here; the worker reports: {layer.detail}")
    assert layer.active and layer.detail == FORKED_AS_INIT, layer.detail


@pytest.mark.parametrize("own_namespaces", [False, True])
def test_workers_die_with_a_killed_server(tmp_path: Path, own_namespaces: bool) -> None:
    """The parent-death signal is set before anything else in a forked worker (and in the
    processes between it and the one the grader started): here the worker waits for a request
    that never comes, and the server the grader started is killed under it."""
    from grader.sandbox.env import BASE_ENV
    from grader.sandbox.runner import _kill_group, _running

    server = ForkServer.start(own_namespaces=own_namespaces)
    assert server is not None
    req_r, req_w = os.pipe()
    res_r, res_w = os.pipe()
    worker = server.spawn(req_r, res_w, str(tmp_path), dict(BASE_ENV))
    os.close(req_r)
    os.close(res_w)
    try:
        assert worker is not None and _running(worker.pid)
        # The pid the grader holds names the worker as this process sees it (a server in a
        # namespace of its own numbers it otherwise): a fork of the server, PID 1 of its own.
        assert SERVER_BOOT.encode() in Path(f"/proc/{worker.pid}/cmdline").read_bytes().split(b"\0")
        if _server_makes_namespaces():
            nspid = re.search(r"^NSpid:\s+(.*)$", Path(f"/proc/{worker.pid}/status").read_text(), re.M)
            assert nspid is not None and nspid.group(1).split()[-1] == "1", nspid
        server.proc.kill()
        server.proc.wait()
        for _ in range(100):
            if not _running(worker.pid):
                break
            time.sleep(0.05)
        assert not _running(worker.pid), "a worker outlived its fork server"
    finally:
        if worker is not None:
            _kill_group(worker.pid)
            worker.reply.close()
            worker.stdout.close()
        os.close(req_w)
        os.close(res_r)
        server.close()


HOSTILE = Path(__file__).resolve().parent / "hostile"


def quick(prepared: Prepared, timeout: float = 2.0) -> Prepared:
    return replace(prepared, limits=replace(prepared.limits, timeout_s=timeout))


@pytest.mark.parametrize(("name", "diagnosis"), [("segfault.py", "crash"), ("exit_in_call.py", "crash"), ("read_stdin.py", "crash")])
def test_forked_worker_crashes_cost_only_their_result(prepared: Prepared, server: ForkServer, name: str, diagnosis: str) -> None:
    report = grade_file(HOSTILE / name, quick(prepared), forkserver=server)
    assert error_names(report) == [diagnosis]
    assert grade_file(EXAMPLES / "correct.py", prepared, forkserver=server).passed  # the server lives on


def _named(marker: str) -> list[int]:
    """Live processes carrying ``marker`` as their name (tests/hostile/_hostile.py renames every
    process it starts, so it can be found from outside a PID namespace)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/comm") as fh:
                if fh.read().strip() == marker:
                    with open(f"/proc/{entry}/stat") as stat:
                        if stat.read().rsplit(")", 1)[1].split()[0] not in "ZX":
                            found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return found


def test_forked_worker_timeout_kills_its_children(prepared: Prepared, server: ForkServer) -> None:
    report = grade_file(HOSTILE / "child_sleeper.py", quick(prepared, 1.5), forkserver=server)
    assert error_names(report) == ["timeout"] and report.duration_s < 6
    markers = re.findall(r"MARKER (hx[0-9a-f]{10})", report.output.text)
    assert len(markers) == 1, report.output.text
    for _ in range(60):  # the worker was killed; give the kernel a moment to finish its children
        if not _named(markers[0]):
            break
        time.sleep(0.05)
    assert not _named(markers[0])


def test_forked_worker_limits_and_output_cap(prepared: Prepared, server: ForkServer) -> None:
    flood = grade_file(HOSTILE / "flood_output.py", prepared, forkserver=server)
    assert flood.output.kept_bytes == prepared.limits.output_bytes and flood.output.total_bytes == 2000 * 4097
    memory = grade_file(EXAMPLES / "memory_limit.py", prepared, forkserver=server)
    assert error_names(memory) == ["memory-limit"]


def test_a_dead_server_falls_back_to_fresh_workers(prepared: Prepared) -> None:
    server = ForkServer.start()
    assert server is not None
    server.proc.kill()
    server.proc.wait()
    report = grade_file(EXAMPLES / "seed_buggy.py", prepared, forkserver=server)
    assert error_names(report) == ["batch-transpose", "scale-by-dk"]
    assert not server.usable and server.spawned == 0
    server.close()


def test_a_server_gone_before_reaping_leaves_the_verdict_to_the_worker_pipes() -> None:
    import os
    import socket

    from grader.sandbox.forkserver import ForkedWorker

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    read_end, write_end = os.pipe()
    os.close(write_end)
    theirs.close()  # what the grader sees when the server dies
    no_such_pid = 4_194_305  # above any pid_max: a kill, should one happen, reaches nobody
    assert ForkedWorker(no_such_pid, ours, open(read_end, "rb", buffering=0)).reap() == (0, None, 0, 0.0)


def test_a_closed_server_starts_nothing(prepared: Prepared) -> None:
    from grader.errors import SandboxError
    from grader.sandbox.runner import run_submission

    server = ForkServer.start()
    assert server is not None
    server.close()  # what Ctrl-C does: no worker, forked or fresh, may start after it
    with pytest.raises(SandboxError, match="grading was stopped"):
        run_submission(EXAMPLES / "correct.py", prepared.function, prepared.probes, prepared.limits, forkserver=server)
