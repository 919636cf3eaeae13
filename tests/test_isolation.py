"""The worker's self-applied isolation layers, each checked by a hostile action that must fail.

Every test runs the isolation in a forked child (never in the pytest process itself: the layers
are irreversible) or in a fresh interpreter, and every hostile action is bounded: connects and
reads have timeouts, the sleepers sleep at most 30 s and are killed by the test if they survive,
allocations and CPU loops stop by themselves. A layer this machine cannot apply (no Landlock, no
user namespaces, not root) makes its test skip with the reason the layer gave.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.sandbox import isolation as iso  # noqa: E402
from grader.sandbox.isolation import (  # noqa: E402
    Layer,
    Policy,
    apply_isolation,
    default_readable_paths,
    probe_layers,
    run_in_pid_namespace,
)

IS_ROOT = os.geteuid() == 0


# ------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------


def _read_until_eof(fd: int, timeout_s: float) -> tuple[bytes, bool]:
    """Everything written to ``fd`` until every writer closed it; (data, True) on EOF, (data,
    False) when ``timeout_s`` passed first."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return b"".join(chunks), False
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)


def _read_json(fd: int, timeout_s: float) -> Any:
    """The first complete JSON document written to ``fd`` (other holders may keep it open)."""
    data = b""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
        try:
            return json.loads(data)
        except ValueError:
            continue
    return None


def _kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _kill_escaper(pid: int) -> None:
    """Clean up after a failed sandbox: kill a pid an escaper reported, but only if it still is
    a fork of this test process (same command line), never some unrelated process."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            theirs = fh.read()
        with open("/proc/self/cmdline", "rb") as fh:
            ours = fh.read()
    except OSError:
        return
    if theirs == ours:
        _kill_quietly(pid)


def in_child(body: Callable[[], dict[str, Any]], timeout_s: float = 10.0) -> dict[str, Any]:
    """Run ``body`` in a forked child and return the dict it produced (sent as JSON)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.close(read_fd)
        result: dict[str, Any] = {"error": "no result"}
        try:
            result = body()
        except BaseException as exc:  # noqa: BLE001 - report anything to the test
            result = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            try:
                view = memoryview(json.dumps(result).encode())
                while view:
                    view = view[os.write(write_fd, view) :]
            finally:
                os._exit(0)
    os.close(write_fd)
    try:
        data, finished = _read_until_eof(read_fd, timeout_s)
    finally:
        os.close(read_fd)
        _kill_quietly(pid)
        os.waitpid(pid, 0)
    assert finished, f"the child did not finish within {timeout_s} s"
    result = json.loads(data)
    assert "error" not in result, result["error"]
    return result


def layers_json(layers: list[Layer]) -> dict[str, list[Any]]:
    return {layer.name: [layer.active, layer.detail] for layer in layers}


def require(layers: dict[str, list[Any]], *names: str) -> None:
    """Skip unless one of ``names`` is active (the layers that can block this action)."""
    if not any(layers.get(name, [False])[0] for name in names):
        reasons = "; ".join(f"{n}: {layers.get(n, [False, 'not reported'])[1]}" for n in names)
        pytest.skip(f"layer unavailable here: {reasons}")


@dataclass
class Box:
    base: str
    workdir: str
    readable: str  # a readable tree with a hidden folder inside
    hidden: str
    secret: str
    open_dir: str  # a world-writable folder outside the workdir

    def policy(self, **changes: Any) -> Policy:
        values: dict[str, Any] = {
            "workdir": self.workdir,
            "readable": default_readable_paths(self.readable),
            "hidden": (self.hidden,),
            "cpu_seconds": 20,
            "memory_bytes": 4 * 2**30,
            "file_bytes": 2**20,
            "open_files": 512,  # above inherited descriptors of the test runner
            "processes": 4096,
        }
        values.update(changes)
        return Policy(**values)


@pytest.fixture
def box() -> Iterator[Box]:
    # Not pytest's tmp_path: it lives under a 0700 folder, and the point of several tests is that
    # only the isolation (not the permission bits) stands between nobody and the files.
    base = tempfile.mkdtemp(prefix="grader-isolation-test-")
    os.chmod(base, 0o755)
    workdir = os.path.join(base, "work")
    os.mkdir(workdir, 0o700)
    readable = os.path.join(base, "ro")
    hidden = os.path.join(readable, "pkg", "reference")
    os.makedirs(hidden)
    for folder in (readable, os.path.join(readable, "pkg"), hidden):
        os.chmod(folder, 0o755)
    Path(readable, "visible.txt").write_text("visible")
    Path(readable, "pkg", "module.py").write_text("X = 1\n")
    secret = os.path.join(hidden, "expected.txt")
    Path(secret).write_text("the expected answers")
    for name in ("visible.txt", "pkg/module.py", "pkg/reference/expected.txt"):
        os.chmod(os.path.join(readable, name), 0o644)
    open_dir = os.path.join(base, "open")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)
    try:
        yield Box(base, workdir, readable, hidden, secret, open_dir)
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ------------------------------------------------------------------------------------------------
# Probe and robustness
# ------------------------------------------------------------------------------------------------


def test_probe_layers_reports_every_layer_without_raising() -> None:
    layers = probe_layers()
    assert all(isinstance(layer, Layer) for layer in layers)
    names = {layer.name for layer in layers}
    expected = {
        "single-threaded", "session", "network-namespace", "ipc-namespace", "mount-namespace", "rlimits",
        "unprivileged-user", "parent-death-signal", "no-new-privs", "landlock-fs", "landlock-net",
        "landlock-signal", "pid-namespace",
    }
    assert expected <= names, expected - names
    for layer in layers:
        assert layer.detail, f"{layer.name} gives no detail"


def test_apply_isolation_never_raises_on_a_nonsense_policy() -> None:
    policy = Policy(
        workdir="/nonexistent/work", readable=("/nonexistent/a", "relative/b"), hidden=("/nonexistent/c",),
        cpu_seconds=20, memory_bytes=4 * 2**30, file_bytes=2**20, open_files=512, processes=4096,
    )
    result = in_child(lambda: {"layers": layers_json(apply_isolation(policy))})
    assert "rlimits" in result["layers"]


def test_threads_are_reported_and_do_not_crash(box: Box) -> None:
    def body() -> dict[str, Any]:
        stop = threading.Event()
        thread = threading.Thread(target=stop.wait, args=(5,), daemon=True)
        thread.start()
        layers = apply_isolation(box.policy(), only={"landlock-fs", "network-namespace"})
        stop.set()
        return {"layers": layers_json(layers)}

    layers = in_child(body)["layers"]
    assert layers["single-threaded"][0] is False
    assert "OPENBLAS_NUM_THREADS" in layers["single-threaded"][1]


# ------------------------------------------------------------------------------------------------
# Network
# ------------------------------------------------------------------------------------------------


def try_connect(family: int, address: Any) -> str:
    """"connected", or the error a bounded connect attempt ended with."""
    client = socket.socket(family, socket.SOCK_STREAM)
    client.settimeout(2.0)
    try:
        client.connect(address)
        return "connected"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.close()


@pytest.mark.parametrize(
    "only",
    [None, {"network-namespace"}, {"landlock-net"}],
    ids=["all-layers", "network-namespace", "landlock-net"],
)
def test_tcp_connect_to_a_local_listener_is_blocked(box: Box, only: set[str] | None) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]

    def body() -> dict[str, Any]:
        layers = apply_isolation(box.policy(), only=only)
        return {"layers": layers_json(layers), "outcome": try_connect(socket.AF_INET, ("127.0.0.1", port))}

    try:
        result = in_child(body)
        require(result["layers"], *(only or {"network-namespace", "landlock-net"}))
        listener.settimeout(0.5)
        with pytest.raises(socket.timeout):
            conn, _ = listener.accept()
            conn.close()
        assert result["outcome"] != "connected"
    finally:
        listener.close()


def test_abstract_unix_socket_of_the_grader_is_unreachable(box: Box) -> None:
    name = f"\0grader-isolation-test-{os.getpid()}-{time.monotonic_ns()}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(name)
    listener.listen(1)

    def body() -> dict[str, Any]:
        layers = apply_isolation(box.policy(), only={"landlock-signal"})
        return {"layers": layers_json(layers), "outcome": try_connect(socket.AF_UNIX, name)}

    try:
        result = in_child(body)
        require(result["layers"], "landlock-signal")
        assert result["outcome"] != "connected"
        listener.settimeout(0.3)
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()


# ------------------------------------------------------------------------------------------------
# Filesystem
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("only", [None, {"landlock-fs"}], ids=["all-layers", "landlock-fs"])
def test_writes_outside_the_workdir_are_blocked(box: Box, only: set[str] | None) -> None:
    outside = os.path.join(box.open_dir, "escaped.txt")
    inside = os.path.join(box.workdir, "scratch.txt")

    def body() -> dict[str, Any]:
        layers = apply_isolation(box.policy(), only=only)
        outcomes = {}
        for label, path in (("outside", outside), ("inside", inside)):
            try:
                with open(path, "w") as fh:
                    fh.write("x")
                outcomes[label] = "written"
            except OSError as exc:
                outcomes[label] = f"{type(exc).__name__}: {exc}"
        try:
            os.mkdir(os.path.join(box.open_dir, "escaped-dir"))
            outcomes["mkdir"] = "created"
        except OSError as exc:
            outcomes["mkdir"] = f"{type(exc).__name__}: {exc}"
        return {"layers": layers_json(layers), **outcomes}

    result = in_child(body)
    require(result["layers"], "landlock-fs")
    assert result["inside"] == "written"
    assert result["outside"] != "written" and not os.path.exists(outside)
    assert result["mkdir"] != "created" and not os.path.exists(os.path.join(box.open_dir, "escaped-dir"))


@pytest.mark.parametrize(
    "only",
    [None, {"landlock-fs"}, {"mount-namespace"}],
    ids=["all-layers", "landlock-fs", "mount-namespace"],
)
def test_hidden_files_are_unreadable_below_a_readable_folder(box: Box, only: set[str] | None) -> None:
    def body() -> dict[str, Any]:
        layers = apply_isolation(box.policy(), only=only)
        outcomes: dict[str, str] = {}
        for label, path in (
            ("secret", box.secret),
            ("visible", os.path.join(box.readable, "visible.txt")),
            ("sibling", os.path.join(box.readable, "pkg", "module.py")),
        ):
            try:
                with open(path) as fh:
                    outcomes[label] = fh.read(100)
            except OSError as exc:
                outcomes[label] = f"denied: {exc}"
        try:
            outcomes["listing"] = ",".join(os.listdir(box.hidden))
        except OSError as exc:
            outcomes["listing"] = f"denied: {exc}"
        return {"layers": layers_json(layers), **outcomes}

    result = in_child(body)
    require(result["layers"], *(only or {"landlock-fs", "mount-namespace"}))
    assert result["secret"] != "the expected answers"
    assert "expected.txt" not in result["listing"]
    assert result["visible"] == "visible"
    assert result["sibling"] == "X = 1\n"


def test_a_hidden_path_inside_another_is_hidden_with_it(box: Box) -> None:
    """An installed grader hides its package folder and, inside it, its references: covering the
    outer folder must not make the inner one count as a failure."""

    def body() -> dict[str, Any]:
        layers = apply_isolation(box.policy(hidden=(box.hidden, box.secret)), only={"mount-namespace"})
        try:
            with open(box.secret) as fh:
                secret = fh.read()
        except OSError as exc:
            secret = f"denied: {exc}"
        return {"layers": layers_json(layers), "secret": secret}

    result = in_child(body)
    active, detail = result["layers"]["mount-namespace"]
    if "private mount namespace" not in detail:
        pytest.skip(f"no mount namespace here: {detail}")
    assert active and "1/1 hidden path(s) covered" in detail, detail
    assert result["secret"] != "the expected answers"


def test_files_outside_the_readable_paths_are_unreadable(box: Box) -> None:
    outside = os.path.join(box.open_dir, "grader-data.txt")
    Path(outside).write_text("grader data")
    os.chmod(outside, 0o644)

    def body() -> dict[str, Any]:
        layers = apply_isolation(box.policy(), only={"landlock-fs"})
        try:
            with open(outside) as fh:
                outcome = fh.read()
        except OSError as exc:
            outcome = f"denied: {exc}"
        with open("/dev/null", "w") as devnull:  # still usable: subprocess and numpy need it
            devnull.write("x")
        with open("/dev/urandom", "rb") as rnd:
            random_bytes = len(rnd.read(8))
        return {"layers": layers_json(layers), "outcome": outcome, "random": random_bytes}

    result = in_child(body)
    require(result["layers"], "landlock-fs")
    assert result["outcome"].startswith("denied")
    assert result["random"] == 8


# ------------------------------------------------------------------------------------------------
# Processes and signals
# ------------------------------------------------------------------------------------------------


def _escaper(hold_w: int, info_w: int, ready_w: int) -> None:
    """In a forked child: setsid, double fork; the grandchild writes its pid as the machine sees
    it (/proc/self of the machine-wide /proc) for the test, signals readiness, and then holds
    ``hold_w`` open while it sleeps at most 30 s."""
    if os.fork() == 0:  # pragma: no cover - runs in the child
        os.setsid()
        if os.fork() == 0:
            try:
                outer_pid = int(os.readlink("/proc/self"))
            except (OSError, ValueError):
                outer_pid = os.getpid()
            os.write(info_w, f"{outer_pid}\n".encode())
            os.write(ready_w, b"x")
            os.close(ready_w)
            time.sleep(30)
        os._exit(0)


def _check_escaper_died(runner: Callable[[Callable[[], int]], int]) -> dict[str, Any]:
    """Run, through ``runner``, a child() that leaves an escaper behind and returns 5 at once;
    then the escaper's end of ``hold`` must close (it died) within a few seconds."""
    hold_r, hold_w = os.pipe()
    info_r, info_w = os.pipe()

    def supervised() -> int:
        os.close(hold_r)
        os.close(info_r)
        ready_r, ready_w = os.pipe()
        _escaper(hold_w, info_w, ready_w)
        for fd in (hold_w, info_w, ready_w):
            os.close(fd)
        _read_until_eof(ready_r, 5.0)  # the escaper is running: the test is not vacuous
        return 5

    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 99
        try:
            code = runner(supervised)
        finally:
            os._exit(code)
    os.close(hold_w)
    os.close(info_w)
    try:
        _, status = os.waitpid(pid, 0)
        info, _ = _read_until_eof(info_r, 1.0)
        outer_pids = [int(x) for x in info.split()]
        _, eof = _read_until_eof(hold_r, 5.0)
    finally:
        os.close(hold_r)
        os.close(info_r)
    if not eof:
        for outer in outer_pids:  # the sandbox failed: clean up after it
            _kill_escaper(outer)
    return {"status": os.waitstatus_to_exitcode(status), "escaper_started": bool(outer_pids), "all_dead": eof}


@pytest.fixture
def pid_namespace_available() -> None:
    def body() -> dict[str, Any]:
        try:
            return {"how": iso.pidns._unshare_pid_namespace()}
        except OSError as exc:
            return {"unavailable": str(exc)}

    result = in_child(body)
    if "unavailable" in result:
        pytest.skip(f"no PID namespace here: {result['unavailable']}")


def test_escapers_die_with_the_pid_namespace(pid_namespace_available: None) -> None:
    result = _check_escaper_died(run_in_pid_namespace)
    assert result["escaper_started"], "the escaper never ran: the test proved nothing"
    assert result["status"] == 5, "the exit code of child() was not relayed"
    assert result["all_dead"], "a setsid + double-fork escaper outlived the PID namespace"


@pytest.fixture
def namespace_forks_available() -> None:
    result = in_child(lambda: {"ok": iso.NamespaceForks.open() is not None})
    if not result["ok"]:
        pytest.skip("this process may not fork into PID namespaces of its own (not privileged)")


def _namespace_of(pid: int | str = "self") -> int:
    return os.stat(f"/proc/{pid}/ns/pid").st_ino


def test_namespace_forks_give_each_child_a_namespace_of_its_own(namespace_forks_available: None) -> None:
    """What the fork server relies on: each fork is PID 1 of a new namespace, and the forking
    process's own later children are back in its namespace (never a worker's)."""

    def body() -> dict[str, Any]:
        forks = iso.NamespaceForks.open()
        assert forks is not None
        seen = []
        for how in ("namespace", "namespace", "plain"):
            read_fd, write_fd = os.pipe()
            pid = forks.fork() if how == "namespace" else os.fork()
            if pid == 0:  # pragma: no cover - runs in the grandchild
                state = {"pid": os.getpid(), "ns": _namespace_of(), "init": iso.forked_as_namespace_init()}
                os.write(write_fd, json.dumps(state).encode())
                os._exit(0)
            os.close(write_fd)
            data, _ = _read_until_eof(read_fd, 5.0)
            os.close(read_fd)
            os.waitpid(pid, 0)
            seen.append(json.loads(data))
        return {"home": _namespace_of(), "seen": seen}

    result = in_child(body)
    first, second, plain = result["seen"]
    assert first["pid"] == second["pid"] == 1 and first["init"] and second["init"]
    assert len({first["ns"], second["ns"], result["home"]}) == 3
    assert plain["ns"] == result["home"] and plain["pid"] != 1 and not plain["init"]


def _user_namespaces_work() -> bool:
    def body() -> dict[str, Any]:
        try:
            iso.namespaces._enter_user_namespace(iso.syscalls.CLONE_NEWPID, strict=True)
        except OSError:
            return {"ok": False}
        return {"ok": iso.syscalls._has_cap(iso.syscalls.CAP_SYS_ADMIN)}

    return bool(in_child(body)["ok"])


def test_an_unprivileged_server_gets_its_namespaces_behind_a_user_namespace() -> None:
    """behind_user_namespace returns in the PID 1 of a new user and PID namespace, whose forks
    are again namespace inits; the caller and the middle process wait and end with it."""
    if not _user_namespaces_work():
        pytest.skip("no user namespaces with capabilities here")

    def body() -> dict[str, Any]:
        forks = iso.NamespaceForks.behind_user_namespace()
        if forks is None:
            return {"error": "no namespaces although the probe made one"}
        read_fd, write_fd = os.pipe()
        pid = forks.fork()
        if pid == 0:  # pragma: no cover - runs in the grandchild
            os.write(write_fd, json.dumps({"pid": os.getpid(), "init": iso.forked_as_namespace_init()}).encode())
            os._exit(0)
        os.close(write_fd)
        data, _ = _read_until_eof(read_fd, 5.0)
        os.waitpid(pid, 0)
        return {"server_pid": os.getpid(), "child": json.loads(data)}

    result = in_child(body)  # the PID 1 answers; the process in_child forked ends as it ends
    assert result == {"server_pid": 1, "child": {"pid": 1, "init": True}}


def test_where_a_user_namespace_gives_no_pid_namespaces_the_caller_carries_on_alone() -> None:
    def body() -> dict[str, Any]:
        iso.NamespaceForks.open = classmethod(lambda cls: None)  # type: ignore[method-assign, assignment]
        caller = os.getpid()
        forks = iso.NamespaceForks.behind_user_namespace()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the grandchild
            os._exit(0 if os.getpid() != 1 else 1)
        _, status = os.waitpid(pid, 0)
        return {"forks": forks is not None, "same_process": os.getpid() == caller, "plain_child": os.waitstatus_to_exitcode(status) == 0}

    assert in_child(body) == {"forks": False, "same_process": True, "plain_child": True}


def _run_as_forked_init(child: Callable[[], int]) -> int:
    """What the fork server does with a worker: fork it as a namespace's init and reap it."""
    forks = iso.NamespaceForks.open()
    assert forks is not None
    pid = forks.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        iso.run_as_namespace_init(child)
    return iso.supervisor._exit_code(os.waitpid(pid, 0)[1])


def test_escapers_die_with_a_namespace_forked_as_such(namespace_forks_available: None) -> None:
    result = _check_escaper_died(_run_as_forked_init)
    assert result["escaper_started"], "the escaper never ran: the test proved nothing"
    assert result["status"] == 5, "the exit code of child() did not reach the parent"
    assert result["all_dead"], "a setsid + double-fork escaper outlived the namespace's init"


def test_a_failed_return_to_the_home_namespace_kills_the_child_and_says_so(namespace_forks_available: None) -> None:
    class Stuck(iso.NamespaceForks):
        def _return_home(self) -> None:
            super()._return_home()
            raise iso.NamespaceStuck("made to fail once the child is forked")

    def body() -> dict[str, Any]:
        forks = Stuck(os.open("/proc/self/ns/pid", os.O_RDONLY))
        try:
            pid = forks.fork()
        except iso.NamespaceStuck:
            pass
        else:
            if pid == 0:  # pragma: no cover - the forked child, killed any moment now: it must
                os._exit(0)  # not reach the result pipe, which the parent writes
            return {"error": "no NamespaceStuck"}
        try:
            left = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            left = None
        return {"left": left}

    assert in_child(body) == {"left": None}  # the child was killed and reaped


def _stop_supervisor(run: Callable[[Callable[[], int]], int], prepare: Callable[[], dict[str, Any]], stop: int) -> tuple[int, bool, dict[str, Any]]:
    """Fork a supervisor running ``run(worker)``. The worker leaves a setsid + double-fork escaper
    (before isolation, while /proc still shows the machine's pids, so the pid it reports is one
    the test can check and clean up), reports ``prepare()`` and sleeps. Then the supervisor gets
    signal ``stop``. Returns its wait status, whether the escaper died, and the report."""
    hold_r, hold_w = os.pipe()
    info_r, info_w = os.pipe()
    ready_r, ready_w = os.pipe()

    def worker() -> int:
        escaper_ready_r, escaper_ready_w = os.pipe()
        _escaper(hold_w, info_w, escaper_ready_w)
        for fd in (hold_w, info_w, escaper_ready_w):
            os.close(fd)
        _read_until_eof(escaper_ready_r, 5.0)
        os.write(ready_w, json.dumps(prepare()).encode())
        os.close(ready_w)
        time.sleep(30)  # bounded; stopped long before
        return 0

    supervisor = os.fork()
    if supervisor == 0:  # pragma: no cover - runs in the child
        code = 99
        try:
            for fd in (hold_r, info_r, ready_r):
                os.close(fd)
            code = run(worker)
        finally:
            os._exit(code)
    for fd in (hold_w, info_w, ready_w):
        os.close(fd)
    try:
        report = _read_json(ready_r, 10.0) or {}  # the supervisor holds ready_w too: no EOF
        os.kill(supervisor, stop)
        _, status = os.waitpid(supervisor, 0)
        info, _ = _read_until_eof(info_r, 1.0)
        _, eof = _read_until_eof(hold_r, 5.0)
    finally:
        for fd in (hold_r, info_r, ready_r):
            os.close(fd)
    if not eof:
        for outer in (int(x) for x in info.split()):
            _kill_escaper(outer)
    return status, eof, report


def test_killing_the_wrapper_ends_the_whole_namespace(box: Box, pid_namespace_available: None) -> None:
    """The grader's last resort: it SIGKILLs the worker it started (the wrapper). The isolated
    PID 1 dies through its parent-death signal, and with it every escaper in the namespace."""
    _, eof, layers = _stop_supervisor(run_in_pid_namespace, lambda: layers_json(apply_isolation(box.policy())), signal.SIGKILL)
    assert layers.get("pid-namespace", [False])[0], layers.get("pid-namespace")
    assert eof, "an escaper outlived the killed wrapper"


def test_escapers_die_with_the_subreaper_fallback() -> None:
    result = _check_escaper_died(iso.pidns._run_with_subreaper)
    assert result["escaper_started"]
    assert result["status"] == 5
    assert result["all_dead"], "the subreaper sweep missed a setsid + double-fork escaper"


@pytest.mark.parametrize("runner", ["pid-namespace", "subreaper"])
def test_sigterm_to_the_supervisor_ends_the_worker_and_its_escapers(runner: str) -> None:
    """The grader's stop after a timeout: SIGTERM to the process it started. That process kills
    the worker and (namespace or sweep) every escaper, then exits at once; this is what makes the
    subreaper fallback hold even though the grader then SIGKILLs the whole group."""
    if runner == "pid-namespace" and not in_child(lambda: {"ok": _pid_namespace_works()})["ok"]:
        pytest.skip("no PID namespace here")
    run = run_in_pid_namespace if runner == "pid-namespace" else iso.pidns._run_with_subreaper
    status, eof, _ = _stop_supervisor(run, dict, signal.SIGTERM)
    assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGTERM
    assert eof, "an escaper outlived the stopped supervisor"


def _pid_namespace_works() -> bool:
    try:
        iso.pidns._unshare_pid_namespace()
        return True
    except OSError:
        return False


def test_the_worker_stays_in_the_group_the_grader_kills(box: Box) -> None:
    """Forked by the leader of a session without a terminal (the process the grader started), the
    worker keeps that process group, so one killpg reaches it even without a PID namespace."""

    def body() -> dict[str, Any]:
        os.setsid()  # as start_new_session does for the process the grader starts
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the grandchild
            layers = apply_isolation(box.policy(), only={"session"})
            os.write(write_fd, json.dumps({"layers": layers_json(layers), "pgid": os.getpgrp()}).encode())
            os._exit(0)
        os.close(write_fd)
        os.waitpid(pid, 0)
        return {**json.loads(os.read(read_fd, 65536)), "leader": os.getpid()}

    result = in_child(body)
    assert result["layers"]["session"][0]
    assert result["pgid"] == result["leader"]


@pytest.mark.skipif(not IS_ROOT, reason="dropping to nobody only happens when the worker runs as root")
def test_root_stays_without_capabilities_when_nobody_could_not_read_a_needed_path(box: Box) -> None:
    private = os.path.join(box.base, "private")
    os.mkdir(private, 0o700)  # a submission folder made with mkdtemp, or under umask 077

    def body() -> dict[str, Any]:
        layers = apply_isolation(box.policy(readable=(*default_readable_paths(box.readable), private)), only={"unprivileged-user", "mount-namespace"})
        return {"layers": layers_json(layers), "uid": os.getuid(), "caps": iso.syscalls._effective_caps(), "listing": os.listdir(private)}

    result = in_child(body)
    active, detail = result["layers"]["unprivileged-user"]
    assert not active and f"could not read {private}" in detail
    assert result["uid"] == 0 and result["caps"] == 0  # still root, but with no capability left
    assert result["listing"] == []  # and the folder stays readable: the submission still loads


def _sigkill_self() -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return 0  # only reached as PID 1 of a namespace, which ignores its own SIGKILL


def _raise() -> int:
    raise RuntimeError("submission blew up")


@pytest.mark.parametrize("runner", ["pid-namespace", "subreaper"])
@pytest.mark.parametrize(
    ("child", "expected"),
    [(lambda: 7, 7), (_raise, 1), (lambda: sys.exit(3), 3), (_sigkill_self, 128 + signal.SIGKILL)],
    ids=["returns-7", "raises", "sys-exit-3", "sigkill"],
)
def test_exit_status_and_inherited_fds_are_relayed(runner: str, child: Callable[[], int], expected: int) -> None:
    def body() -> dict[str, Any]:
        read_fd, write_fd = os.pipe()
        run = run_in_pid_namespace if runner == "pid-namespace" else iso.pidns._run_with_subreaper

        def wrapped() -> int:
            os.write(write_fd, f"result pipe ok, pid {os.getpid()}".encode())  # inherited fd works
            return child()

        code = run(wrapped)
        os.close(write_fd)
        return {"code": code, "message": os.read(read_fd, 100).decode()}

    result = in_child(body)
    assert result["message"].startswith("result pipe ok")
    if child is _sigkill_self and result["message"].endswith("pid 1"):
        expected = 0  # PID 1 ignores a SIGKILL it sends itself: the kernel protects the init
    assert result["code"] == expected


@pytest.mark.parametrize("code", [0, 3, 128 + signal.SIGKILL, 128 + signal.SIGXCPU, 128 + signal.SIGSEGV])
def test_relay_exit_reproduces_the_child_status(code: int) -> None:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            iso.relay_exit(code)
        finally:
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    if code > 128:
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == code - 128
        assert not os.WCOREDUMP(status)
    else:
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == code


def test_child_dies_with_its_parent(box: Box) -> None:
    """Parent-death signal: when the worker's parent (the grader or the namespace wrapper) dies,
    the worker dies too, even after setsid and the uid change (which clear PR_SET_PDEATHSIG)."""
    hold_r, hold_w = os.pipe()
    ready_r, ready_w = os.pipe()
    middle = os.fork()
    if middle == 0:  # pragma: no cover - runs in the child
        try:
            os.close(hold_r)
            os.close(ready_r)
            child_r, child_w = os.pipe()
            if os.fork() == 0:
                os.close(child_r)
                applied = apply_isolation(box.policy())
                os.write(child_w, json.dumps({**layers_json(applied), "pid": os.getpid()}).encode())
                os.close(child_w)
                time.sleep(30)  # holds hold_w until killed, at most 30 s
                os._exit(0)
            os.close(child_w)
            os.close(hold_w)
            # Die only once the worker has applied every layer: the signal must survive them.
            os.write(ready_w, json.dumps(_read_json(child_r, 10.0)).encode())
        finally:
            os._exit(0)
    os.close(hold_w)
    os.close(ready_w)
    try:
        layers = _read_json(ready_r, 10.0) or {}
        os.waitpid(middle, 0)
        _, eof = _read_until_eof(hold_r, 5.0)
    finally:
        os.close(hold_r)
        os.close(ready_r)
    if not eof and isinstance(layers.get("pid"), int):
        _kill_escaper(layers["pid"])  # the sandbox failed: do not leave the sleeper behind
    require(layers, "parent-death-signal")
    assert eof, "the worker outlived its parent"


def test_signals_to_the_grader_are_blocked_by_landlock_scope(box: Box) -> None:
    def body() -> dict[str, Any]:
        parent = os.getppid()
        os.kill(parent, 0)  # allowed before: the test would be vacuous otherwise
        layers = apply_isolation(box.policy(), only={"landlock-signal"})
        try:
            os.kill(parent, 0)  # signal 0: checks permission, delivers nothing
            outcome = "allowed"
        except OSError as exc:
            outcome = f"{type(exc).__name__}: {exc}"
        os.kill(os.getpid(), 0)  # itself: still allowed
        return {"layers": layers_json(layers), "outcome": outcome}

    result = in_child(body)
    require(result["layers"], "landlock-signal")
    assert result["outcome"].startswith("PermissionError")


def test_signals_to_the_grader_are_blocked_with_all_layers(box: Box) -> None:
    def body() -> dict[str, Any]:
        parent = os.getppid()
        layers = apply_isolation(box.policy())
        try:
            os.kill(parent, 0)
            outcome = "allowed"
        except OSError as exc:
            outcome = f"{type(exc).__name__}: {exc}"
        return {"layers": layers_json(layers), "outcome": outcome}

    result = in_child(body)
    require(result["layers"], "landlock-signal", "unprivileged-user")
    assert result["outcome"].startswith("PermissionError")


# ------------------------------------------------------------------------------------------------
# Privileges and limits
# ------------------------------------------------------------------------------------------------


@pytest.mark.skipif(not IS_ROOT, reason="dropping to nobody only happens when the worker runs as root")
def test_root_drops_to_nobody(box: Box) -> None:
    grader_pid = os.getpid()

    def body() -> dict[str, Any]:
        layers = apply_isolation(box.policy(processes=4096), only={"unprivileged-user", "mount-namespace"})
        try:
            with open(f"/proc/{grader_pid}/mem", "rb") as fh:
                fh.read(1)
            mem = "readable"
        except OSError as exc:
            mem = f"{type(exc).__name__}: {exc}"
        with open(os.path.join(box.workdir, "mine.txt"), "w") as fh:  # chowned to nobody
            fh.write("ok")
        return {
            "layers": layers_json(layers), "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
            "caps": iso.syscalls._effective_caps(), "mem": mem,
        }

    result = in_child(body)
    require(result["layers"], "unprivileged-user")
    assert (result["uid"], result["gid"], result["groups"], result["caps"]) == (65534, 65534, [], 0)
    assert result["mem"] != "readable"


@pytest.mark.skipif(not IS_ROOT, reason="RLIMIT_NPROC is only enforced once the worker is not root")
def test_process_count_is_limited_after_dropping_root(box: Box) -> None:
    def body() -> dict[str, Any]:
        # nobody may already run processes on this machine: allow a few more than that.
        before = sum(1 for p in os.listdir("/proc") if p.isdigit() and os.stat(f"/proc/{p}").st_uid == 65534)
        layers = apply_isolation(box.policy(processes=before + 3), only={"unprivileged-user", "rlimits", "mount-namespace"})
        started, refused = 0, ""
        for _ in range(20):  # bounded: at most 20 forks, each child exits at once
            try:
                pid = os.fork()
            except OSError as exc:
                refused = f"{type(exc).__name__}: {exc}"
                break
            if pid == 0:  # pragma: no cover
                time.sleep(0.5)
                os._exit(0)
            started += 1
        for _ in range(started):
            os.wait()
        return {"layers": layers_json(layers), "started": started, "refused": refused}

    result = in_child(body)
    require(result["layers"], "unprivileged-user")
    assert result["refused"], f"{result['started']} forks, none refused"
    assert result["started"] < 20


def test_rlimits_bound_memory_and_file_size(box: Box) -> None:
    def body() -> dict[str, Any]:
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # so that an oversize write raises instead
        vm = iso.limits._vm_size()
        layers = apply_isolation(box.policy(memory_bytes=vm + 256 * 2**20, file_bytes=2**16), only={"rlimits"})
        limits = {name: resource.getrlimit(getattr(resource, name)) for name in ("RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NOFILE")}
        try:
            block = bytearray(512 * 2**20)  # bounded: twice the allowance, never touched
            memory = f"allocated {len(block)}"
        except MemoryError:
            memory = "MemoryError"
        try:
            with open(os.path.join(box.workdir, "big.bin"), "wb") as fh:
                fh.write(b"\0" * 2**17)
            big = "written"
        except OSError as exc:
            big = f"{type(exc).__name__}: {exc}"
        return {"layers": layers_json(layers), "limits": limits, "memory": memory, "big": big}

    result = in_child(body)
    require(result["layers"], "rlimits")
    for name, (soft, hard) in result["limits"].items():
        assert soft == hard, f"{name}: soft {soft} != hard {hard}: the submission could raise it"
    assert result["limits"]["RLIMIT_CORE"] == [0, 0]
    assert result["memory"] == "MemoryError"
    assert result["big"] != "written"


def test_cpu_limit_kills_a_busy_loop(box: Box) -> None:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        apply_isolation(box.policy(cpu_seconds=1), only={"rlimits"})
        deadline = time.monotonic() + 6.0  # bounded even if the limit failed
        while time.monotonic() < deadline:
            pass
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, f"status {status:#x}"


def test_no_new_privs_is_set(box: Box) -> None:
    def body() -> dict[str, Any]:
        layers = apply_isolation(box.policy(), only={"no-new-privs"})
        return {"layers": layers_json(layers), "nnp": iso.syscalls._prctl(iso.syscalls.PR_GET_NO_NEW_PRIVS)}

    result = in_child(body)
    require(result["layers"], "no-new-privs")
    assert result["nnp"] == 1


# ------------------------------------------------------------------------------------------------
# The real thing: a fresh interpreter like the worker, numpy still working afterwards
# ------------------------------------------------------------------------------------------------

WORKER_LIKE = textwrap.dedent(
    """
    import json, os, sys
    sys.path.insert(0, sys.argv[1])
    import numpy as np  # before isolation, as the worker does
    from grader.sandbox.isolation import Policy, apply_isolation, default_readable_paths, run_in_pid_namespace

    workdir, readable, hidden, out_fd = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    policy = Policy(
        workdir=workdir, readable=default_readable_paths(readable), hidden=(hidden,),
        cpu_seconds=20, memory_bytes=2 * 2**30, file_bytes=2**20, open_files=512, processes=4096,
    )

    def worker():
        layers = apply_isolation(policy)
        result = {"layers": {l.name: [l.active, l.detail] for l in layers}}
        rng = np.random.default_rng(0)
        Q, K, V = (rng.standard_normal((2, 8, 16)) for _ in range(3))
        scores = Q @ K.transpose(0, 2, 1) / np.sqrt(16)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        out = weights @ V
        result["attention_ok"] = bool(out.shape == (2, 8, 16) and np.isfinite(out).all() and np.allclose(weights.sum(-1), 1))
        result["linalg_ok"] = bool(np.allclose(np.linalg.inv(np.eye(3) * 2) @ (np.eye(3) * 2), np.eye(3)))
        result["fft_ok"] = bool(abs(np.fft.fft(np.ones(4))[0] - 4) < 1e-12)  # numpy.fft loads lazily
        import fractions, statistics  # stdlib modules not imported before isolation
        result["stdlib_ok"] = statistics.mean([1, 2, 3]) == 2 and fractions.Fraction(1, 2) * 2 == 1
        try:
            with open(hidden + "/expected.txt") as fh:
                result["hidden"] = fh.read()
        except OSError as exc:
            result["hidden"] = "denied"
        with open(os.path.join(workdir, "scratch.npy"), "wb") as fh:
            np.save(fh, out)
        result["uid"] = os.getuid()
        result["pid"] = os.getpid()
        os.write(out_fd, json.dumps(result).encode())
        return 0

    sys.exit(run_in_pid_namespace(worker))
    """
)


def test_numpy_works_in_a_fully_isolated_worker(box: Box) -> None:
    read_fd, write_fd = os.pipe()
    env = {"PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TMPDIR": box.workdir}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", WORKER_LIKE, str(ROOT), box.workdir, box.readable, box.hidden, str(write_fd)],
            pass_fds=(write_fd,), cwd=box.workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        os.close(write_fd)
        write_fd = -1
        data, _ = _read_until_eof(read_fd, 15.0)
        try:
            output, _ = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
    assert proc.returncode == 0, output.decode(errors="replace")
    result = json.loads(data)
    layers = result["layers"]
    assert layers["single-threaded"][0], layers["single-threaded"][1]
    assert result["attention_ok"] and result["linalg_ok"] and result["fft_ok"] and result["stdlib_ok"]
    if layers["landlock-fs"][0] or layers["mount-namespace"][0]:
        assert result["hidden"] != "the expected answers"
    if layers["pid-namespace"][0]:
        assert result["pid"] == 1
    if IS_ROOT and layers["unprivileged-user"][0]:
        assert result["uid"] == 65534
    assert os.path.exists(os.path.join(box.workdir, "scratch.npy"))


# ------------------------------------------------------------------------------------------------
# What the worker may see: a checkout's .git, a loose file's neighbours, kernel keyrings
# ------------------------------------------------------------------------------------------------


def test_a_checkouts_git_is_covered_and_its_folder_stays_listable(box: Box) -> None:
    git = Path(box.readable, ".git")
    git.mkdir()
    Path(git, "config").write_text("extraheader = AUTHORIZATION: basic c2VjcmV0")
    os.chmod(git, 0o755)
    os.chmod(git / "config", 0o644)

    def body() -> dict[str, Any]:
        layers = apply_isolation(box.policy(hidden=(), masked=(str(git),)))
        try:
            config = (git / "config").read_text()
        except OSError as exc:
            config = f"denied: {exc}"
        return {"layers": layers_json(layers), "config": config, "listing": sorted(os.listdir(box.readable))}

    result = in_child(body)
    require(result["layers"], "mount-namespace")
    assert "c2VjcmV0" not in result["config"]
    assert "visible.txt" in result["listing"]  # helper modules beside it stay importable


def test_a_loose_file_reads_itself_and_not_its_neighbours(box: Box) -> None:
    from grader.sandbox.policy import SandboxSettings, request_meta

    batch = Path(box.base, "batch")
    batch.mkdir()
    os.chmod(batch, 0o755)
    mine, theirs = batch / "alice.py", batch / "bob.py"
    mine.write_text("MINE = 1\n")
    theirs.write_text("THEIRS = 2\n")
    for path in (mine, theirs):
        os.chmod(path, 0o644)
    meta = request_meta(mine.resolve(), box.workdir, SandboxSettings(), (str(batch),), batch, alone=True)

    def body() -> dict[str, Any]:
        layers = apply_isolation(box.policy(readable=tuple(meta["readable"]), hidden=()))
        outcomes: dict[str, str] = {}
        for label, path in (("mine", mine), ("theirs", theirs)):
            try:
                outcomes[label] = path.read_text()
            except OSError as exc:
                outcomes[label] = f"denied: {exc}"
        try:
            outcomes["listing"] = ",".join(os.listdir(batch))
        except OSError as exc:
            outcomes["listing"] = f"denied: {exc}"
        return {"layers": layers_json(layers), **outcomes}

    result = in_child(body)
    require(result["layers"], "landlock-fs")
    assert result["mine"] == "MINE = 1\n"
    assert result["theirs"].startswith("denied"), result["theirs"]
    assert "bob.py" not in result["listing"]


KEY_SPEC_SESSION_KEYRING = -3
KEY_SPEC_USER_KEYRING = -4
KEYCTL_SEARCH = 10


def _keys() -> tuple[Callable[..., int], Callable[..., int]]:
    import ctypes
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("key syscall numbers are written for x86_64")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def add(keyring: int, description: str, payload: bytes) -> int:
        return int(libc.syscall(ctypes.c_long(248), b"user", description.encode(), payload, ctypes.c_size_t(len(payload)), ctypes.c_long(keyring)))

    def search(keyring: int, description: str) -> int:
        return int(libc.syscall(ctypes.c_long(250), ctypes.c_long(KEYCTL_SEARCH), ctypes.c_long(keyring), b"user", description.encode(), ctypes.c_long(0)))

    return add, search


def test_no_key_crosses_between_the_grader_and_workers(box: Box) -> None:
    add, search = _keys()
    description = f"grader-test-{os.getpid()}-{time.monotonic_ns()}"

    def grader_then_worker() -> dict[str, Any]:
        planted = add(KEY_SPEC_SESSION_KEYRING, description, b"grader secret")  # the grader's
        layers = apply_isolation(box.policy())
        found = search(KEY_SPEC_SESSION_KEYRING, description)
        left = add(KEY_SPEC_USER_KEYRING, description + "-left", b"from worker one")
        return {"layers": layers_json(layers), "planted": planted, "found": found, "left": left}

    def next_worker() -> dict[str, Any]:
        layers = apply_isolation(box.policy())
        return {"layers": layers_json(layers), "found": search(KEY_SPEC_USER_KEYRING, description + "-left")}

    first = in_child(grader_then_worker)
    if first["planted"] < 0:
        pytest.skip("no session keyring to plant a key in")
    require(first["layers"], "keyring")
    assert first["found"] < 0, "the worker found the grader's session key"
    assert first["left"] > 0  # it did leave a key in its user keyring
    second = in_child(next_worker)
    assert second["found"] < 0, "a worker found the key an earlier worker left"


@pytest.mark.skipif(not IS_ROOT, reason="folders are replaced for nobody only when the worker runs as root")
def test_a_hidden_path_below_a_replaced_folder_counts_as_covered(box: Box) -> None:
    """A folder nobody may not enter is replaced by a tmpfs holding only the readable paths below
    it; a hidden path beside them (the result cache in root's home) is then gone from view, which
    is what hiding asks: the layer stays in force."""
    private = os.path.join(box.base, "private")
    shown = os.path.join(private, "shown")
    cache = os.path.join(private, "cache")
    os.makedirs(shown)
    os.makedirs(cache)
    os.chmod(private, 0o700)
    os.chmod(shown, 0o755)
    Path(cache, "entry.json").write_text("a cached verdict")

    def body() -> dict[str, Any]:
        policy = box.policy(readable=(*default_readable_paths(box.readable), shown), hidden=(box.hidden, cache))
        layers = apply_isolation(policy, only={"unprivileged-user", "mount-namespace"})
        return {"layers": layers_json(layers), "cache_seen": os.path.lexists(cache)}

    result = in_child(body)
    active, detail = result["layers"]["mount-namespace"]
    assert active, detail
    assert "2/2 hidden path(s)" in detail and not result["cache_seen"]
