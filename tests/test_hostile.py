"""The hostile-submission suite: every attack of tests/hostile/, graded by the real `grade` command.

Each mode grades every hostile submission in one `grade --format json` run, so "the grader
survived" means: that one process went through all of them and wrote a complete report. The
modes run at the same time (they mostly wait for time limits):

* ``as-is``: with the test's own privileges (root on the development machine: the worker then
  drops to nobody);
* ``unprivileged``: as a non-root uid without any capability, inside a user namespace (what a
  rootless container or a CI runner gives): the worker may still create namespaces of its own;
* ``unprivileged-no-userns``: the same, with user namespaces forbidden, as on CI machines that
  disable them: the namespace layers are off, Landlock and the subreaper fallback remain.

The unprivileged modes need root to set up (a user namespace with a chosen uid map); without
root the ``as-is`` mode already is the unprivileged run and they are skipped.

Every attack is bounded by itself (see each file), and around the grader the test sets traps it
then inspects from outside: TCP and UDP listeners on the loopback, world-writable folders, a file
only unpickling would create, a fake CI secret in the grader's environment, and a random process
name ("marker") each process-spawning attack gives its children, looked for in /proc of the whole
machine once the run is over.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from grader.sandbox.isolation import FORKED_AS_INIT

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = Path(__file__).resolve().parent / "hostile"
TIMEOUT_S = 2.0
MEMORY_MB = 512

# Grading order. Attacks whose leftovers would die by themselves within seconds (the fork storm's
# children sleep 10 s) come last, so that the leak check right after the run still sees them.
ORDER = [
    "exit_at_import.py", "exit_in_call.py", "segfault.py", "read_stdin.py", "forge_results.py", "forge_sandbox.py",
    "forge_parser_bombs.py", "flood_output.py", "print_env.py", "steal_references.py", "tcp_connect.py", "write_outside.py",
    "evil_subclass.py", "monkeypatch_numpy.py", "huge_array.py", "memory_bomb.py", "kill_parent.py",
    "keyring_leave.py", "keyring_steal.py", "mode_000.py", "read_git_config.py", "link_root.py", "unix_sockets.py",
    "endless_loop.py", "sleep_at_import.py", "ignore_sigterm.py", "child_sleeper.py",
    "escape_setsid.py", "escape_double_fork.py", "fork_storm.py",
]

# Attacks graded as a candidate's checkout (a folder named after the attack, holding it, the
# helper and hostile.json), with what the arena adds to the folder.
CHECKOUTS = {"read_git_config.py": "git", "link_root.py": "links"}
REFUSED = {"link_root.py"}  # refused by discovery: no worker, no sandbox report

MODES = ["as-is", "unprivileged", "unprivileged-no-userns"]

# Runs a command as uid 1000, a plain unprivileged user of the machine: no capability, counted by
# RLIMIT_NPROC. Optionally user namespaces are forbidden below it (inside a user namespace of the
# launcher's own, so the machine's setting is untouched). Folders uid 1000 may not enter but must
# (the interpreter under /root, 0700) are exposed in a private mount namespace first, the way the
# worker does it for nobody. Needs root: only root may map another uid and mount.
LAUNCHER = textwrap.dedent(
    """
    import ctypes, os, sys
    from grader.sandbox.isolation import mounts, paths, syscalls
    mode, reach, command = sys.argv[1], sys.argv[2].split(os.pathsep), sys.argv[3:]
    go_r, go_w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        os.close(ready_r)
        try:
            syscalls._unshare(syscalls.CLONE_NEWNS)
            syscalls._mount(None, "/", None, syscalls.MS_REC | syscalls.MS_PRIVATE)
            mounts._make_reachable(paths._unreachable(reach, 1000, 1000), 1000, 1000)
            syscalls._unshare(syscalls.CLONE_NEWUSER)
        except OSError as exc:
            print(f"launcher: {exc}", file=sys.stderr)
            os._exit(90)
        os.write(ready_w, b"x")
        os.read(go_r, 1)  # the parent has written the uid and gid maps
        if mode == "unprivileged-no-userns":
            with open("/proc/sys/user/max_user_namespaces", "w") as fh:
                fh.write("0")
        os.setgroups([])
        os.setresgid(1000, 1000, 1000)
        os.setresuid(1000, 1000, 1000)
        os.execv(command[0], command)
    os.close(go_r)
    os.close(ready_w)
    if os.read(ready_r, 1):
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w") as fh:
                fh.write("0 100000 1\\n1000 1000 1\\n")  # root inside only to set the sysctl
        os.write(go_w, b"x")
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
    """
)


def _command(mode: str, args: list[str], reach: list[Path]) -> list[str]:
    return _as(mode, [sys.executable, "-m", "grader", *args], reach)


def _as(mode: str, command: list[str], reach: list[Path]) -> list[str]:
    if mode == "as-is":
        return command
    paths = [sys.prefix, sys.base_prefix, os.path.realpath(sys.executable), str(ROOT), *map(str, reach)]
    return [sys.executable, "-c", LAUNCHER, mode, os.pathsep.join(paths), *command]


# Landlock's ABI version and whether a user namespace with a network namespace can be made, found
# out independently of the grader's own probe (so that a layer the machine offers but the grader
# wrongly reports as off fails the suite instead of skipping its attacks).
KERNEL_OFFERS = textwrap.dedent(
    """
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(ctypes.c_long(444), ctypes.c_void_p(None), ctypes.c_size_t(0), ctypes.c_uint32(1))
    pid = os.fork()
    if pid == 0:
        os._exit(0 if libc.unshare(0x10000000 | 0x40000000) == 0 else 1)  # CLONE_NEWUSER | CLONE_NEWNET
    _, status = os.waitpid(pid, 0)
    print(max(0, abi), int(os.waitstatus_to_exitcode(status) == 0))
    """
)


def _mode_unavailable(mode: str) -> str | None:
    if mode == "as-is":
        return None
    if os.geteuid() != 0:
        return "the test runs unprivileged already: the as-is mode is the unprivileged run"
    probe = subprocess.run(_command(mode, ["--version"], []), capture_output=True, timeout=30, cwd=ROOT, env=_env(""))
    if probe.returncode != 0:
        return f"cannot switch to an unprivileged uid here (exit {probe.returncode}: {probe.stderr.decode(errors='replace')[-200:]})"
    return None


def _env(secret: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "GRADER_CI_SECRET": secret}


@dataclass
class Arena:
    """The folder the hostile submissions are graded from, and the traps around it."""

    base: Path
    subs: Path
    tcp: socket.socket
    udp: socket.socket
    write_targets: list[Path]
    pickle_marker: Path
    git_token: str  # in the .git/config of a checkout
    token: str  # names the keys of this arena
    unix: socket.socket | None = None  # listening in a 0700 folder of the grading user
    unix_folder: Path | None = None
    neighbours: threading.Event = field(default_factory=threading.Event)  # set: stop making them

    @classmethod
    def build(cls, owner: int | None = None) -> Arena:
        """``owner``: the uid the grader runs as (the owner of the private socket folder)."""
        base = Path(tempfile.mkdtemp(prefix="grader-hostile-"))
        os.chmod(base, 0o755)
        subs = base / "subs"
        subs.mkdir()
        os.chmod(subs, 0o777)  # only the sandbox, not the permission bits, may stop a write here
        outside = base / "outside"
        outside.mkdir()
        os.chmod(outside, 0o777)
        for name in ORDER + ["_hostile.py"]:
            if name not in CHECKOUTS:
                shutil.copy(HOSTILE / name, subs / name)
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(8)
        tcp.setblocking(False)
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", 0))
        udp.setblocking(False)
        token = secrets.token_hex(6)
        targets = [subs / "escaped.txt", outside / "escaped.txt", Path(tempfile.gettempdir()) / f"grader-hostile-{token}.txt"]
        if os.path.isdir("/dev/shm"):
            targets.append(Path("/dev/shm") / f"grader-hostile-{token}.txt")
        arena = cls(base, subs, tcp, udp, targets, base / "pickle-marker", "ghs_" + secrets.token_hex(12), token)
        # A socket where a session bus or an ssh-agent would be: a 0700 folder of the grading user.
        arena.unix_folder = Path(tempfile.mkdtemp(prefix="grader-hostile-user-"))
        unix_path = arena.unix_folder / "agent.sock"
        arena.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        arena.unix.bind(str(unix_path))
        arena.unix.listen(8)
        arena.unix.setblocking(False)
        os.chmod(unix_path, 0o777)
        if owner is not None and owner != os.getuid():
            os.chown(arena.unix_folder, owner, owner)
        threading.Thread(target=arena._make_neighbours, daemon=True).start()
        config = {
            "key_grader": f"grader-hostile-grader-{token}",
            "key_left": f"grader-hostile-left-{token}",
            "tcp_port": tcp.getsockname()[1],
            "udp_port": udp.getsockname()[1],
            "write_targets": [str(t) for t in targets],
            "pickle_marker": str(arena.pickle_marker),
            "unix_socket": str(unix_path),
            "neighbour_token": f"grader-neighbour-{token}",
        }
        (subs / "hostile.json").write_text(json.dumps(config))
        for name, extra in CHECKOUTS.items():
            checkout = subs / Path(name).stem
            checkout.mkdir()
            for part in (name, "_hostile.py"):
                shutil.copy(HOSTILE / part, checkout / part)
            (checkout / "hostile.json").write_text(json.dumps(config))
            if extra == "git":
                (checkout / ".git").mkdir()
                (checkout / ".git" / "config").write_text(f'[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic {arena.git_token}\n')
                for path in (checkout / ".git", checkout / ".git" / "config"):
                    os.chmod(path, 0o755 if path.is_dir() else 0o644)
            else:
                os.symlink("/", checkout / "src")
                os.symlink("..", checkout / "up")
            os.chmod(checkout, 0o755)
        return arena

    def path_of(self, name: str) -> Path:
        return self.subs / Path(name).stem if name in CHECKOUTS else self.subs / name

    def tcp_connections(self) -> int:
        count = 0
        while True:
            try:
                conn, _ = self.tcp.accept()
            except (BlockingIOError, OSError):
                return count
            conn.close()
            count += 1

    def unix_connections(self) -> int:
        count = 0
        while self.unix is not None:
            try:
                conn, _ = self.unix.accept()
            except (BlockingIOError, OSError):
                break
            conn.close()
            count += 1
        return count

    def _make_neighbours(self) -> None:
        """What another worker does in /tmp: a folder made and removed every 20 ms, named so that
        the attack can tell it (at most 10,000 times, about three minutes)."""
        for n in range(10_000):
            if self.neighbours.wait(0.02):
                return
            folder = Path("/tmp") / f"grader-neighbour-{self.token}-{n}"
            try:
                folder.mkdir()
                folder.rmdir()
            except OSError:
                return

    def udp_datagrams(self) -> int:
        count = 0
        while True:
            try:
                self.udp.recvfrom(1024)
            except (BlockingIOError, OSError):
                return count
            count += 1

    def close(self) -> None:
        self.neighbours.set()
        self.tcp.close()
        self.udp.close()
        if self.unix is not None:
            self.unix.close()
        if self.unix_folder is not None:
            shutil.rmtree(self.unix_folder, ignore_errors=True)
        for target in self.write_targets:
            target.unlink(missing_ok=True)
        shutil.rmtree(self.base, ignore_errors=True)


@dataclass
class Batch:
    mode: str
    arena: Arena
    secret: str
    proc: subprocess.Popen[bytes]
    started: float
    info: dict[str, Any] = field(default_factory=dict)
    code: int | None = None
    stdout: str = ""
    stderr: str = ""
    doc: dict[str, Any] = field(default_factory=dict)
    left_behind: dict[str, list[int]] = field(default_factory=dict)  # marker -> pids still alive
    connections: int = 0
    datagrams: int = 0
    unix_connections: int = 0

    def finish(self) -> None:
        try:
            out, err = self.proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        self.code = self.proc.returncode
        self.stdout, self.stderr = out.decode(errors="replace"), err.decode(errors="replace")
        # Right away, before any leftover could end by itself.
        self.left_behind = _leftovers(re.findall(r"MARKER (hx[0-9a-f]{10})", self.stdout))
        self.connections = self.arena.tcp_connections()
        self.datagrams = self.arena.udp_datagrams()
        self.unix_connections = self.arena.unix_connections()
        try:
            self.doc = json.loads(self.stdout)
        except ValueError:
            self.doc = {}

    def sub(self, name: str) -> dict[str, Any]:
        for sub in self.doc.get("submissions", []):
            if _name(sub) == name:
                return sub
        pytest.fail(f"[{self.mode}] no report for {name}: exit {self.code}, stderr {self.stderr[-500:]!r}")

    def output(self, name: str) -> str:
        return str(self.sub(name)["output"]["text"])

    def active(self, name: str) -> set[str]:
        return {layer["name"] for layer in self.sub(name)["sandbox"] if layer["active"]}

    def require(self, name: str, *layers: str) -> None:
        """Skip unless one of ``layers`` was active for this submission: only they stop the attack."""
        if not self.active(name) & set(layers):
            details = {layer["name"]: layer["detail"] for layer in self.sub(name)["sandbox"]}
            pytest.skip(f"[{self.mode}] none of {', '.join(layers)} active here: " + "; ".join(f"{n}: {details.get(n, 'not reported')}" for n in layers))


def _name(sub: dict[str, Any]) -> str:
    """The attack a report is about: its file, or the checkout refused before a file was chosen."""
    path = Path(sub["path"])
    return path.name if path.suffix == ".py" else path.name + ".py"


def _plant_session_key(description: str, payload: bytes) -> bool:
    """A secret in this process's session keyring, which the grader started below inherits."""
    import ctypes
    import platform

    if platform.machine() != "x86_64":
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(ctypes.c_long(248), b"user", description.encode(), payload, ctypes.c_size_t(len(payload)), ctypes.c_long(-3)) > 0


def _comm_of(pid: str) -> str | None:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            comm = fh.read().strip()
        with open(f"/proc/{pid}/stat") as fh:
            data = fh.read()
        return None if data[data.rfind(")") + 2 :].split()[0] in "ZX" else comm
    except OSError:
        return None


def _leftovers(markers: list[str]) -> dict[str, list[int]]:
    """Processes still alive with one of ``markers`` as name, after a grace period for the
    kernel to tear down a PID namespace. Killed once recorded: a failed sandbox must not leave
    them running (the names are random, so nothing else is ever hit)."""
    wanted = set(markers)
    found: dict[str, list[int]] = {}
    deadline = time.monotonic() + 3.0
    while True:
        found = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (comm := _comm_of(entry)) in wanted:
                found.setdefault(comm, []).append(int(entry))
        if not found or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for pids in found.values():
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return found


@pytest.fixture(scope="module")
def batches() -> Iterator[dict[str, Batch | str]]:
    """Start every available mode at once; finish each as soon as its run ends."""
    runs: dict[str, Batch | str] = {}
    arenas: list[Arena] = []
    try:
        for mode in MODES:
            reason = _mode_unavailable(mode)
            if reason:
                runs[mode] = reason
                continue
            arena = Arena.build(owner=None if mode == "as-is" else 1000)
            arenas.append(arena)
            secret = "ci-secret-" + secrets.token_hex(8)
            _plant_session_key(f"grader-hostile-grader-{arena.token}", secret.encode())
            info = subprocess.run(_command(mode, ["--sandbox-info", "--format", "json"], [arena.base]), capture_output=True, timeout=60, cwd=ROOT, env=_env(secret))
            args = ["--no-cache", "--format", "json", "--timeout", str(TIMEOUT_S), "--memory", str(MEMORY_MB), "--candidate", *(str(arena.path_of(n)) for n in ORDER)]
            proc = subprocess.Popen(_command(mode, args, [arena.base]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=_env(secret))
            batch = Batch(mode, arena, secret, proc, time.monotonic())
            batch.info = json.loads(info.stdout) if info.returncode == 0 else {"error": info.stderr.decode(errors="replace")}
            runs[mode] = batch
        # One thread each: every run's output is read as it comes (a full pipe would hold the
        # grader back) and its leak check follows its end at once.
        finishers = [threading.Thread(target=b.finish) for b in runs.values() if isinstance(b, Batch)]
        for thread in finishers:
            thread.start()
        for thread in finishers:
            thread.join()
        yield runs
    finally:
        for run in runs.values():
            if isinstance(run, Batch) and run.proc.poll() is None:
                run.proc.kill()
                run.proc.wait()
        for arena in arenas:
            arena.close()


@pytest.fixture(params=MODES)
def batch(request: pytest.FixtureRequest, batches: dict[str, Batch | str]) -> Batch:
    run = batches[request.param]
    if isinstance(run, str):
        pytest.skip(run)
    return run


def diagnoses(batch: Batch, name: str) -> list[str]:
    return sorted(d["name"] for d in batch.sub(name)["diagnoses"] if d["severity"] == "error")


# ------------------------------------------------------------------------------------------------
# The grader itself
# ------------------------------------------------------------------------------------------------


def test_every_hostile_file_is_in_the_suite() -> None:
    files = sorted(p.name for p in HOSTILE.glob("*.py") if not p.name.startswith("_"))
    assert files == sorted(ORDER)


def test_the_grader_survives_every_submission(batch: Batch) -> None:
    assert batch.code == 1, f"[{batch.mode}] exit {batch.code}: {batch.stderr[-2000:]}"
    assert batch.stderr == ""
    graded = [_name(s) for s in batch.doc["submissions"]]
    assert graded == ORDER
    assert not any(s["passed"] for s in batch.doc["submissions"] if Path(s["path"]).name not in ("flood_output.py", "print_env.py"))


def test_layers_are_reported_and_match_sandbox_info(batch: Batch) -> None:
    assert "layers" in batch.info, batch.info
    expected = {layer["name"]: layer["active"] for layer in batch.info["layers"]}
    for sub in batch.doc["submissions"]:
        if _name(sub) in REFUSED:
            continue
        reported = {layer["name"]: layer["active"] for layer in sub["sandbox"]}
        assert reported == expected, f"{sub['path']}: {reported} != {expected}"
        assert sub["isolated"] == batch.info["isolated"]
    if batch.mode == "unprivileged-no-userns":
        assert batch.info["isolated"]["network"] is False  # the namespace layers really are off


def test_every_layer_the_machine_offers_is_in_force(batch: Batch) -> None:
    offers = subprocess.run(_as(batch.mode, [sys.executable, "-c", KERNEL_OFFERS], []), capture_output=True, text=True, timeout=60, check=True)
    abi, namespaces = (int(x) for x in offers.stdout.split())
    active = batch.active("flood_output.py")
    expected = {name for name, needed in (("landlock-fs", 1), ("landlock-net", 4), ("landlock-signal", 6)) if abi >= needed}
    if batch.mode == "unprivileged-no-userns":
        assert not active & {"network-namespace", "mount-namespace", "pid-namespace"}
    elif namespaces:  # as root, or where unprivileged user namespaces are allowed
        expected |= {"network-namespace", "ipc-namespace", "mount-namespace", "pid-namespace"}
    expected |= {"single-threaded", "session", "rlimits", "parent-death-signal", "no-new-privs", "unprivileged-user"}
    if namespaces and batch.mode != "unprivileged-no-userns":
        expected.add("keyring")  # a user namespace of its own: a private user keyring
    assert expected <= active, expected - active
    if namespaces and batch.mode != "unprivileged-no-userns":
        # One process per submission: the fork server forked each worker into its namespace,
        # from its own process as root, else from a user namespace of its own.
        details = {layer["name"]: layer["detail"] for layer in batch.sub("flood_output.py")["sandbox"]}
        assert details["pid-namespace"] == FORKED_AS_INIT, details["pid-namespace"]


def test_nothing_is_left_running(batch: Batch) -> None:
    markers = re.findall(r"MARKER (hx[0-9a-f]{10})", batch.stdout)
    spawners = ["ignore_sigterm.py", "child_sleeper.py", "escape_setsid.py", "escape_double_fork.py", "fork_storm.py"]
    for name in spawners:
        assert "MARKER hx" in batch.output(name), f"{name} never ran its attack: the check would prove nothing"
    assert len(markers) >= len(spawners)
    assert batch.left_behind == {}, f"[{batch.mode}] processes outlived their worker: {batch.left_behind}"


def test_no_secret_reaches_any_output(batch: Batch) -> None:
    assert "environ of self" in batch.output("print_env.py")  # it did look
    assert batch.secret not in batch.stdout
    assert batch.secret not in batch.stderr
    assert "GRADER_CI_SECRET" not in batch.stdout
    assert batch.sub("print_env.py")["passed"]  # a correct submission that prints is no bug


# ------------------------------------------------------------------------------------------------
# One attack each
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected", "status"),
    [
        ("endless_loop.py", ["timeout"], "timeout"),
        ("sleep_at_import.py", ["timeout"], "timeout"),
        ("ignore_sigterm.py", ["timeout"], "timeout"),
        ("child_sleeper.py", ["timeout"], "timeout"),
        ("escape_setsid.py", ["timeout"], "timeout"),
        ("memory_bomb.py", ["memory-limit"], "completed"),
        ("exit_at_import.py", ["load-error"], "completed"),
        ("exit_in_call.py", ["crash"], "crashed"),
        ("segfault.py", ["crash"], "crashed"),
        ("read_stdin.py", ["crash"], "completed"),
        ("forge_results.py", ["crash"], "protocol-error"),
        ("forge_sandbox.py", ["crash"], "protocol-error"),
        ("forge_parser_bombs.py", ["crash"], "protocol-error"),
        ("huge_array.py", ["bad-return"], "completed"),
        ("evil_subclass.py", ["values-mismatch"], "completed"),
        ("monkeypatch_numpy.py", ["values-mismatch"], "completed"),
        ("steal_references.py", ["values-mismatch"], "completed"),
        ("tcp_connect.py", ["values-mismatch"], "completed"),
        ("write_outside.py", ["values-mismatch"], "completed"),
        ("escape_double_fork.py", ["values-mismatch"], "completed"),
        ("fork_storm.py", ["values-mismatch"], "completed"),
        ("keyring_leave.py", ["values-mismatch"], "completed"),
        ("keyring_steal.py", ["values-mismatch"], "completed"),
        ("mode_000.py", ["values-mismatch"], "completed"),
        ("read_git_config.py", ["values-mismatch"], "completed"),
        ("unix_sockets.py", ["values-mismatch"], "completed"),
    ],
)
def test_verdict_and_diagnosis(batch: Batch, name: str, expected: list[str], status: str) -> None:
    sub = batch.sub(name)
    assert not sub["passed"]
    assert diagnoses(batch, name) == expected, sub["diagnoses"]
    assert sub["worker_status"] == status
    if status == "timeout":
        assert sub["duration_s"] < TIMEOUT_S + 3  # stopped at the limit, not when the attack gave up


def test_sleep_at_import_never_loads(batch: Batch) -> None:
    load = next(c for c in batch.sub("sleep_at_import.py")["checks"] if c["id"] == "load")
    assert not load["passed"] and "did not finish loading" in load["summary"]


def test_a_forged_sandbox_report_is_refused(batch: Batch) -> None:
    sub = batch.sub("forge_sandbox.py")
    assert "a second sandbox report" in sub["diagnoses"][0]["message"]
    assert sub["sandbox"] and not any(layer["detail"] == "forged" for layer in sub["sandbox"])


def test_flood_is_capped_and_counted(batch: Batch) -> None:
    output = batch.sub("flood_output.py")["output"]
    assert output["total_bytes"] == 2000 * 4097
    assert len(output["text"]) == 64 * 1024
    assert batch.sub("flood_output.py")["passed"]


def test_stdin_is_empty(batch: Batch) -> None:
    assert "stdin gave 0 characters" in batch.output("read_stdin.py")


def test_stored_references_cannot_be_read_or_replayed(batch: Batch) -> None:
    batch.require("steal_references.py", "landlock-fs", "mount-namespace")
    output = batch.output("steal_references.py")
    assert "import grader.attention: failed" in output  # the reference implementation is out of reach
    assert "reference: failed" in output  # it knew where to look, and was refused
    assert "SUCCEEDED" not in output, output
    assert "stolen outputs: 0" in output and "FOUND" not in output


def test_tcp_connect_to_the_loopback_is_blocked(batch: Batch) -> None:
    batch.require("tcp_connect.py", "network-namespace", "landlock-net")
    assert "tcp connect: failed" in batch.output("tcp_connect.py")
    assert batch.connections == 0


def _require_view_of_own_paths(batch: Batch, name: str) -> None:
    """As root the drop to nobody already keeps the worker out of the grading user's folders;
    graded by an ordinary user only the worker's mount namespace (its view of the shared folders)
    does. Without user namespaces there is none: a known limit, reported by --sandbox-info."""
    batch.require(name, "mount-namespace", *(("unprivileged-user",) if batch.mode == "as-is" else ()))


def test_the_grading_users_unix_socket_is_out_of_reach(batch: Batch) -> None:
    _require_view_of_own_paths(batch, "unix_sockets.py")
    assert "unix connect: failed" in batch.output("unix_sockets.py")
    assert batch.unix_connections == 0


def test_other_workers_folders_are_out_of_sight(batch: Batch) -> None:
    batch.require("unix_sockets.py", "mount-namespace")
    output = batch.output("unix_sockets.py")
    assert "inotify watch on /tmp: set" in output  # it watched: the check proves something
    assert "neighbour names seen: 0" in output, output


def test_udp_to_the_loopback_is_blocked(batch: Batch) -> None:
    batch.require("tcp_connect.py", "network-namespace")  # Landlock does not cover UDP
    assert "udp send: failed" in batch.output("tcp_connect.py")
    assert batch.datagrams == 0


def test_no_file_appears_outside_the_working_folder(batch: Batch) -> None:
    batch.require("write_outside.py", "landlock-fs")
    output = batch.output("write_outside.py")
    assert "write in the working folder: SUCCEEDED" in output  # writing works where it may
    for target in batch.arena.write_targets:
        assert f"write {target}: failed" in output
        assert not target.exists(), f"{target} was written"


def test_pickle_payload_never_runs(batch: Batch) -> None:
    assert not batch.arena.pickle_marker.exists()
    # The grader got plain zeros, whatever the subclass said about equality.
    weights = next(c for c in batch.sub("evil_subclass.py")["checks"] if c["id"] == "weights")
    assert "got 0," in weights["summary"]


def test_killing_the_parent_does_not_take_the_grader_down(batch: Batch) -> None:
    output = batch.output("kill_parent.py")
    assert "kill parent" in output and "kill 1:" in output  # the attempts were made
    for line in output.splitlines():
        if line.startswith(("kill grandparent", "kill parent")) and "pid-namespace" not in batch.active("kill_parent.py"):
            assert "failed" in line, line  # outside a PID namespace the parent is real: refused
    if "pid-namespace" in batch.active("kill_parent.py"):
        # Its "parent" is pid 0 (outside the namespace: kill(0) hits its own group) and pid 1 is
        # itself, which the kernel does not let its own SIGKILL reach: it goes on and fails.
        assert diagnoses(batch, "kill_parent.py") == ["values-mismatch"]
    else:
        # Without a PID namespace it shares the group of the process the grader started, and its
        # SIGKILL to that group reaches only itself: the grader reports its death.
        assert diagnoses(batch, "kill_parent.py") == ["crash"]
    # The grader went on to grade the submissions after this one (ORDER puts several there).
    graded = [_name(s) for s in batch.doc["submissions"]]
    assert graded.index("kill_parent.py") < len(graded) - 1


def test_fork_storm_is_limited(batch: Batch) -> None:
    match = re.search(r"fork storm: started (\d+)", batch.output("fork_storm.py"))
    assert match, batch.output("fork_storm.py")
    if "rlimits" in batch.active("fork_storm.py") and "unprivileged-user" in batch.active("fork_storm.py"):
        assert int(match.group(1)) < 64  # RLIMIT_NPROC (SandboxSettings.processes)
    assert batch.left_behind == {}


def test_a_checkout_linking_out_is_refused_and_the_batch_goes_on(batch: Batch) -> None:
    sub = batch.sub("link_root.py")
    assert not sub["passed"] and not sub["sandbox"]  # no worker ever ran it
    assert "leading outside the candidate's folder" in json.dumps(sub), sub
    assert "list src/etc" not in batch.stdout  # never run, so never listed anything
    assert _name(batch.doc["submissions"][-1]) == ORDER[-1]


def test_a_checkouts_git_folder_is_never_seen(batch: Batch) -> None:
    output = batch.output("read_git_config.py")
    assert "list checkout: SUCCEEDED" in output and "read_git_config.py" in output  # its folder is readable
    batch.require("read_git_config.py", "mount-namespace")  # the one layer that covers .git
    assert batch.arena.git_token not in batch.stdout and batch.arena.git_token[::-1] not in batch.stdout
    assert "extraheader" not in output[::-1] and "read .git/config: failed" in output, output


def test_no_key_crosses_between_the_grader_and_a_worker_or_between_workers(batch: Batch) -> None:
    assert "leave a user key: SUCCEEDED" in batch.output("keyring_leave.py"), batch.output("keyring_leave.py")
    output = batch.output("keyring_steal.py")
    assert batch.secret not in batch.stdout and batch.secret[::-1] not in batch.stdout
    assert "grader session key: failed" in output, output
    assert "left session key: failed" in output, output
    batch.require("keyring_steal.py", "keyring")  # a private user keyring needs a user namespace
    assert "left user key: failed" in output, output


def test_nothing_is_left_in_tmp(batch: Batch) -> None:
    output = batch.output("mode_000.py")
    assert "lock up: SUCCEEDED" in output, output
    workdir = re.search(r"WORKDIR: (\S+)", output)
    assert workdir, output
    # Seen from the test's side: the worker's path is the same inside a private mount namespace.
    assert not Path(workdir.group(1)).exists(), f"[{batch.mode}] {workdir.group(1)} was left behind"
