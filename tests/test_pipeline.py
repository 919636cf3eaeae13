"""How a run is laid out for speed, asserted as behaviour (speed itself is measured by
benchmarks/throughput.py): workers bounded by --jobs while judging overlaps them, the probes'
arrays laid out once per run, the judging side imported in the background, and the `grade`
process started without the modules it does not need yet."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import grader.batch as batch
from conftest import EXAMPLES, ROOT
from grader.api import JUDGEMENT_MODULES, JudgementWarmer, prepare
from grader.discover import Submission
from grader.launch import will_grade
from grader.sandbox.protocol import decode
from grader.sandbox import runner
from grader.sandbox.runner import WorkerLimits, build_request


def _run_fresh(code: str) -> None:
    """Run ``code`` in a new interpreter (what it imports is then its own) and require success."""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def _submission(path: Path) -> Submission:
    return Submission(label=str(path), file=path, folder=None, error=None)


def test_no_more_workers_than_jobs_and_judging_overlaps(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """At most --jobs submissions are observed at once; a submission being judged holds no slot."""
    lock = threading.Lock()
    observing = judging = 0
    most_observing = 0
    overlapped = threading.Event()
    prepared = prepare()
    real = batch.grade_one(_submission(EXAMPLES / "correct.py"), prepared, None)[0]

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

    monkeypatch.setattr(batch, "observe", fake_observe)
    monkeypatch.setattr(batch, "judge", fake_judge)
    files = []
    for i in range(12):
        files.append(tmp_path / f"s{i}.py")
        files[-1].write_text(f"# {i}\n")
    seen: list[int] = []
    outcome = batch.run_batch([_submission(f) for f in files], prepared, lambda index, report: seen.append(index), jobs=2)
    assert sorted(seen) == list(range(12)) and not outcome.interrupted
    assert [r.path for r in outcome.ordered()] == [str(f) for f in files]
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


def test_the_warmer_imports_the_judging_side_only_once_started() -> None:
    code = (
        "import sys\n"
        "from grader.api import JudgementWarmer, JUDGEMENT_MODULES\n"
        "warmer = JudgementWarmer('grader.report.text')\n"
        "warmer.wait()  # never started: returns at once, imports nothing\n"
        "assert not any(m in sys.modules for m in JUDGEMENT_MODULES), 'imported before start'\n"
        "warmer.start(); warmer.start(); warmer.wait()\n"
        "missing = [m for m in (*JUDGEMENT_MODULES, 'grader.report.text') if m not in sys.modules]\n"
        "assert not missing, missing\n"
    )
    _run_fresh(code)
    assert JudgementWarmer().modules == JUDGEMENT_MODULES


def test_observing_side_does_not_import_the_judging_side() -> None:
    """A cold `grade` imports checks, diagnosis and the reporter while its worker runs; that only
    helps if nothing before the worker starts imports them already."""
    code = (
        "import sys\n"
        "import grader.batch, grader.cache, grader.cli\n"
        f"early = [m for m in {JUDGEMENT_MODULES!r} + ('rich', 'grader.report.text', 'grader.report.jsonfmt') if m in sys.modules]\n"
        "assert not early, early\n"
    )
    _run_fresh(code)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["sub.py"], True),
        (["-j", "4", "-o", "junit=r.xml", "subs/"], True),
        (["--candidate", "."], True),
        ([], False),
        (["--help"], False),
        (["sub.py", "-h"], False),
        (["--version"], False),
        (["--explain", "scale-by-dk"], False),
        (["--explain=S201"], False),
        (["--sandbox-info"], False),
        (["explain", "S201"], False),
        (["references", "--verify"], False),
        (["suite", "check", "s.yaml"], False),
    ],
)
def test_the_fork_server_starts_early_only_for_a_grading_command(args: list[str], expected: bool) -> None:
    assert will_grade(args) is expected


def test_commands_without_grading_leave_no_fork_server_behind(tmp_path: Path) -> None:
    """Usage errors after the early start (one click refuses before the command runs, one the
    command finds): the server is killed before the process ends."""
    before = _fork_servers()
    result = subprocess.run([sys.executable, "-m", "grader", "--jobs", "0", str(tmp_path / "sub.py")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "--jobs" in result.stderr
    assert not _fork_servers() - before
    result = subprocess.run([sys.executable, "-m", "grader", str(tmp_path / "missing.py")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "no such file" in result.stderr
    # At once: a server left running would end by itself too, once it finished starting and
    # saw its grader gone; this asserts that `grade` ended it before exiting.
    assert not _fork_servers() - before


def _fork_servers(own: bool = False) -> set[int]:
    """The fork servers of this checkout running on the machine, but for this test process's own
    (a fixture's) unless ``own``: a server left by a finished `grade` has another parent."""
    from grader.sandbox.forkserver import SERVER_BOOT

    found = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
            ppid = int((cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if SERVER_BOOT.encode() in args and str(ROOT).encode() in args and (own or ppid != os.getpid()):
            found.add(int(cmdline.parent.name))
    return found


def test_the_leftover_check_finds_a_running_server() -> None:
    from grader.sandbox.forkserver import ForkServer

    server = ForkServer.start()
    assert server is not None
    with server:
        assert server.proc.pid in _fork_servers(own=True)


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
    report = batch.grade_one(_submission(EXAMPLES / "correct.py"), prepared, None)[0]
    assert report.passed and report.worker_status == "completed"


def test_the_caller_may_work_while_the_fork_server_forks(monkeypatch: pytest.MonkeyPatch) -> None:
    """on_waiting runs before the fork server is asked (early in a cold run it may still be
    importing numpy), and the whole request is in its pipe by then: the worker never waits."""
    import fcntl
    import termios

    from grader.sandbox.forkserver import ForkServer

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
        run = runner.run_submission(EXAMPLES / "correct.py", "attention", prepared.probes, prepared.limits, prepared.sandbox, forkserver=server, on_waiting=lambda: seen.append(("waiting", 0)))
    assert run.status == "completed" and run.load is not None and run.load.ok
    assert [what for what, _ in seen] == ["waiting", "spawn"]
    assert seen[1][1] > len(request) * 0.9  # the request, whole (its header names a temporary folder)


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
    slots = batch._Slots(1, threading.Event())
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
    slots = batch._Slots(1, stopping)
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


def test_the_replay_is_imported_only_when_a_mistake_is_to_be_named() -> None:
    """Judging a submission that passes every check needs neither the replay nor the texts of
    mistakes; a cold `grade` of one does without their import."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from grader.api import grade_file, prepare, JUDGEMENT_MODULES\n"
        "import importlib\n"
        "for name in JUDGEMENT_MODULES: importlib.import_module(name)\n"
        "lazy = ('grader.diagnosis.replay', 'grader.diagnosis.describe', 'grader.diagnosis.scale_fit')\n"
        "assert not [m for m in lazy if m in sys.modules], 'imported with the judging side'\n"
        "report = grade_file(Path('submissions_example/correct.py'), prepare())\n"
        "assert report.passed and not [m for m in lazy if m in sys.modules], 'imported for a passing submission'\n"
        "report = grade_file(Path('submissions_example/seed_buggy.py'), prepare())\n"
        "assert 'scale-by-dk' in [d.name for d in report.diagnoses]\n"
    )
    _run_fresh(code)


def test_a_terminal_report_of_a_mistake_needs_no_emoji_table_and_no_fractions() -> None:
    """rich's table of emoji names (a fifth of its import) is loaded only to read ":name:" in
    markup, which the reports never use; a fitted power is written without the fractions module."""
    code = (
        "import io, sys\n"
        "from pathlib import Path\n"
        "from grader.api import grade_file, prepare\n"
        "from grader.report.base import RunInfo\n"
        "from grader.report.text import text_reporter\n"
        "report = grade_file(Path('tests/corpus/buggy/scale-other.py'), prepare())\n"
        "out = io.StringIO()\n"
        "text_reporter(out, RunInfo('default', 10.0)).add(report)\n"
        "assert 'd_k^-1/4' in out.getvalue() and 'scale-other' in out.getvalue(), out.getvalue()\n"
        "assert 'rich._emoji_codes' not in sys.modules and 'fractions' not in sys.modules\n"
    )
    _run_fresh(code)


def test_the_collector_is_off_for_the_start_and_back_on_for_a_batch() -> None:
    _run_fresh(
        "import gc, sys\n"
        "import grader.cli as cli\n"
        "seen = []\n"
        "cli.main = lambda early=None: seen.append(gc.isenabled())\n"
        "sys.argv = ['grade', '--version']\n"
        "from grader.launch import main\n"
        "main()\n"
        "assert seen == [False], seen\n"
        "cli.collect_garbage_again()\n"
        "assert gc.isenabled() and gc.get_freeze_count() > 0\n"
    )
