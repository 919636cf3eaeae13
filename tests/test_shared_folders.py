"""What the worker must not find in the folders it shares with others: the temporary folders,
/run and the grading user's home are replaced, in the worker's mount namespace, by a view of only
the worker's own paths. A unix socket there (a session bus, a user's service manager, an
ssh-agent in a 0700 folder) cannot be reached by path, and another worker's folder cannot be
seen (no listing, no inotify watch on it).

Each test runs the isolation in a forked child (tests/test_isolation.py's helpers) and is bounded:
the socket server accepts for a few seconds at most, the child has a deadline.
"""

from __future__ import annotations

import os
import pwd
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from grader.sandbox.isolation import Layer, apply_isolation
from tests.test_isolation import Box, box, in_child, layers_json  # noqa: F401 - box is a fixture


def _mount_namespace_or_skip(result: dict[str, Any]) -> None:
    active, detail = result["layers"]["mount-namespace"]
    if "private mount namespace" not in detail:
        pytest.skip(f"no mount namespace here: {detail}")


class _Listener:
    """A unix socket in a 0700 folder of its own under the temporary folder, accepting for a
    few seconds at most and counting the connections it got."""

    def __init__(self, owner: int | None = None) -> None:
        self.folder = tempfile.mkdtemp(prefix="grader-private-sockets-")
        self.path = os.path.join(self.folder, "agent.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        if owner is not None:
            os.chown(self.folder, owner, owner)
        os.chmod(self.path, 0o777)  # only the folder's 0700 guards it, as for a user's agent
        self.server.listen(4)
        self.server.settimeout(0.2)
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        for _ in range(50):  # at most about ten seconds
            if self.stop.is_set():
                return
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.server.close()
        os.unlink(self.path)
        os.rmdir(self.folder)


def _connect(path: str) -> str:
    """"connected", or the name of the error that stopped the connection (2 s at most)."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(2)
    try:
        client.connect(path)
        return "connected"
    except OSError as exc:
        return type(exc).__name__
    finally:
        client.close()


def _assert_out_of_reach(isolate: Callable[[], list[Layer]], owner: int | None = None) -> None:
    """A listener in a 0700 folder of ``owner``; a forked child runs ``isolate`` and then tries
    to connect to it: it must not get through, and the listener must have seen no one."""
    listener = _Listener(owner)
    try:
        result = in_child(lambda: {"layers": layers_json(isolate()), "reached": _connect(listener.path)})
    finally:
        listener.close()
    _mount_namespace_or_skip(result)
    assert result["reached"] != "connected"
    assert listener.accepted == 0


@pytest.mark.parametrize("only", [None, {"mount-namespace"}], ids=["all-layers", "mount-namespace"])
def test_a_socket_in_a_private_folder_of_the_grading_user_is_out_of_reach(box: Box, only: set[str] | None) -> None:
    _assert_out_of_reach(lambda: apply_isolation(box.policy(), only=only))


def test_the_temporary_folders_show_only_the_workers_own_paths(box: Box) -> None:
    neighbour = tempfile.mkdtemp(prefix="grader-work-neighbour-")
    shm = Path("/dev/shm") if os.path.isdir("/dev/shm") else None
    shm_file = None
    if shm is not None and os.access(shm, os.W_OK):
        shm_file = tempfile.mkstemp(prefix="grader-neighbour-", dir=shm)
        os.close(shm_file[0])
    try:

        def body() -> dict[str, Any]:
            layers = apply_isolation(box.policy(), only={"mount-namespace"})
            Path(box.workdir, "scratch.txt").write_text("mine")  # the worker's folder stays writable
            shown = {folder: sorted(os.listdir(folder)) for folder in ("/tmp", "/dev/shm") if os.path.isdir(folder)}
            return {"layers": layers_json(layers), "shown": shown, "visible": Path(box.readable, "visible.txt").read_text()}

        result = in_child(body)
    finally:
        os.rmdir(neighbour)
        if shm_file is not None:
            os.unlink(shm_file[1])
    _mount_namespace_or_skip(result)
    # Only the chains to the worker's own paths are left (its folder, its readable tree, and
    # whatever else the worker reads there: a checkout of the grader, a virtual environment).
    wanted = [os.path.realpath(p) for p in (*box.policy().readable, box.workdir)]
    allowed = {os.path.relpath(p, "/tmp").split(os.sep)[0] for p in wanted if p.startswith("/tmp/")}
    assert os.path.basename(box.base) in allowed
    assert set(result["shown"].get("/tmp", [])) <= allowed, result["shown"]
    assert os.path.basename(neighbour) not in result["shown"].get("/tmp", [])
    if shm_file is not None:
        assert os.path.basename(shm_file[1]) not in result["shown"].get("/dev/shm", [])
    assert result["visible"] == "visible"
    assert Path(box.workdir, "scratch.txt").read_text() == "mine"


def test_the_home_folder_shows_only_what_the_worker_reads(box: Box) -> None:
    home = os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir)
    if not os.path.isdir(home) or home == "/":
        pytest.skip("this user has no home folder")

    def body() -> dict[str, Any]:
        layers = apply_isolation(box.policy(), only={"mount-namespace"})
        try:
            shown = sorted(os.listdir(home))
        except OSError as exc:
            shown = [type(exc).__name__]
        return {"layers": layers_json(layers), "shown": shown}

    result = in_child(body)
    _mount_namespace_or_skip(result)
    wanted = [os.path.realpath(p) for p in box.policy().readable]
    allowed = {os.path.relpath(p, home).split(os.sep)[0] for p in wanted if p.startswith(home.rstrip("/") + "/")}
    if any(home == p or home.startswith(p.rstrip("/") + "/") for p in wanted):
        pytest.skip("the home folder is itself inside a path the worker reads")
    assert set(result["shown"]) <= allowed, result["shown"]


def test_an_unprivileged_grading_user_cannot_reach_its_own_socket(box: Box) -> None:
    """Graded by an ordinary user, the worker keeps that user's uid (in a user namespace): the
    permission bits of the user's 0700 folder do not stand in its way, only the view does. As
    root the test plays that user with uid 65534, owner of the folder."""
    nobody = 65534 if os.geteuid() == 0 else None
    for path in (box.base, box.workdir):
        if nobody is not None:
            os.chown(path, nobody, nobody)

    def as_the_user() -> list[Layer]:
        if nobody is not None:
            os.setgroups([])
            os.setgid(nobody)
            os.setuid(nobody)
        return apply_isolation(box.policy())

    _assert_out_of_reach(as_the_user, owner=nobody)
