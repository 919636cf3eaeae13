"""The worker boundary through the library: the sandbox it reports, strict mode, grading with
every layer off, and what the worker process holds. The attacks themselves are in
test_hostile.py (through the `grade` command, in every privilege mode this machine allows).
"""

from __future__ import annotations

import re
import time
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import EXAMPLES, ROOT, error_names
from grader.api import Prepared, grade_file
from grader.errors import SandboxUnavailable
from grader.observation import WorkerRun
from grader.sandbox import runner
from grader.sandbox.isolation import GUARANTEES, missing_guarantees, probe_layers
from grader.sandbox.policy import hidden_paths
from grader.sandbox.worker import MAX_RETURN_ELEMENTS, to_array

HOSTILE = Path(__file__).resolve().parent / "hostile"


def with_sandbox(prepared: Prepared, strict: bool = False, layers: frozenset[str] | None = None) -> Prepared:
    return replace(prepared, sandbox=replace(prepared.sandbox, strict=strict, layers=layers))


@pytest.fixture(scope="module")
def here_missing() -> list[str]:
    return missing_guarantees(probe_layers())


def test_the_report_says_which_layers_were_in_force(prepared: Prepared, here_missing: list[str]) -> None:
    report = grade_file(EXAMPLES / "correct.py", prepared)
    assert report.passed
    names = {layer.name for layer in report.sandbox}
    assert set(GUARANTEES.values()) <= names
    assert all(layer.detail for layer in report.sandbox)
    assert missing_guarantees(report.sandbox) == here_missing


def test_grading_is_the_same_with_every_layer_off(prepared: Prepared) -> None:
    """A CI machine with no namespaces and no Landlock: the layers are reported off, and the
    verdicts do not change."""
    bare = with_sandbox(prepared, layers=frozenset())
    for name, passed, errors in (("correct.py", True, []), ("seed_buggy.py", False, ["batch-transpose", "scale-by-dk"]), ("timeout.py", False, ["timeout"])):
        timed = replace(bare, limits=replace(bare.limits, timeout_s=2.0)) if name == "timeout.py" else bare
        report = grade_file(EXAMPLES / name, timed)
        assert (report.passed, error_names(report)) == (passed, errors), name
        off = {layer.name for layer in report.sandbox if not layer.active}
        assert {"network-namespace", "landlock-fs", "rlimits", "unprivileged-user"} <= off
        assert missing_guarantees(report.sandbox)[:2] == ["network", "filesystem"]


def test_strict_mode_refuses_before_loading_the_submission(prepared: Prepared, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[WorkerRun] = []
    collect = runner._collect

    def spy(*args: object) -> WorkerRun:
        run = collect(*args)  # type: ignore[arg-type]
        seen.append(run)
        return run

    monkeypatch.setattr(runner, "_collect", spy)
    without_network = frozenset(set(GUARANTEES.values()) - {"network-namespace"})
    strict = with_sandbox(prepared, strict=True, layers=without_network)
    with pytest.raises(SandboxUnavailable, match=r"lacked network \(network-namespace: not selected\).*; it was not loaded"):
        grade_file(EXAMPLES / "correct.py", strict)
    (run,) = seen
    assert run.load is None and run.observations == {} and run.status == "completed"


def test_strict_mode_grades_when_every_guarantee_holds(prepared: Prepared, here_missing: list[str]) -> None:
    if here_missing:
        pytest.skip(f"this machine lacks {', '.join(here_missing)} isolation")
    report = grade_file(EXAMPLES / "seed_buggy.py", with_sandbox(prepared, strict=True))
    assert error_names(report) == ["batch-transpose", "scale-by-dk"]


def test_the_grader_data_is_hidden(prepared: Prepared) -> None:
    hidden = hidden_paths(prepared.sandbox.hidden)
    assert str((ROOT / "grader").resolve()) in hidden
    assert str(prepared.refs.directory.resolve()) in hidden
    assert str((ROOT / "grader" / "fixtures").resolve()) in hidden


def test_the_worker_never_imports_the_reference_implementation() -> None:
    """What the worker imports before isolation stays in the submission's process: none of it
    may know the answers (the reference attention, the references, the checks)."""
    code = "import sys; sys.path.insert(0, sys.argv[1]); import grader.sandbox.worker; print(' '.join(sorted(m for m in sys.modules if m.startswith('grader'))))"
    loaded = subprocess.run([sys.executable, "-I", "-c", code, str(ROOT)], capture_output=True, text=True, timeout=60, check=True).stdout.split()
    # The framework adapter, the loading of submission forms and the isolation layers (every
    # module of that package named, so that a new one is looked at) hold no answers either.
    expected = [
        "grader",
        "grader.frameworks",
        "grader.sandbox",
        "grader.sandbox.compile_cache",  # points JAX at the batch's compile cache, read-only
        "grader.sandbox.forms",
        "grader.sandbox.gradients",  # asks autograd for gradients; knows no reference gradient
        "grader.sandbox.isolation",
        "grader.sandbox.isolation.identity",
        "grader.sandbox.isolation.keyring",
        "grader.sandbox.isolation.landlock",
        "grader.sandbox.isolation.limits",
        "grader.sandbox.isolation.model",
        "grader.sandbox.isolation.mounts",
        "grader.sandbox.isolation.namespaces",
        "grader.sandbox.isolation.paths",
        "grader.sandbox.isolation.pidns",
        "grader.sandbox.isolation.process",
        "grader.sandbox.isolation.supervisor",
        "grader.sandbox.isolation.syscalls",
        "grader.sandbox.protocol",
        "grader.sandbox.worker",
    ]
    assert loaded == expected


class LiesAboutSize(np.ndarray):
    @property
    def size(self) -> int:
        return 1


@pytest.mark.parametrize(
    "value",
    [np.broadcast_to(np.float64(1.0), (100_000, 100_000)), np.broadcast_to(np.float64(1.0), (100_000, 100_000)).view(LiesAboutSize)],
    ids=["broadcast-view", "subclass-lying-about-size"],
)
def test_a_huge_array_is_refused_before_it_is_copied(value: np.ndarray) -> None:
    # Copying either would need 80 GB; the check must come first.
    assert np.ndarray.size.__get__(value) > MAX_RETURN_ELEMENTS
    assert to_array(value) is None


def test_a_plain_copy_is_made_of_a_subclass() -> None:
    value = np.arange(6.0).reshape(2, 3).view(LiesAboutSize)
    array = to_array(value)
    assert array is not None and type(array) is np.ndarray and array.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_the_threat_model_lists_every_layer() -> None:
    model = (ROOT / "docs" / "sandbox.md").read_text().split("## Isolation layers", 1)[1]
    documented = re.findall(r"^\| \*\*([a-z-]+)\*\* \|", model, flags=re.M)
    reported = {layer.name for layer in probe_layers()}
    assert len(documented) == len(set(documented))
    # user-namespace is only reported where it is needed: when the grader is not root.
    assert reported <= set(documented) and set(documented) - reported <= {"user-namespace"}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_forged_ready_message_buys_no_time(prepared: Prepared) -> None:
    """"ready" (which starts a framework submission's clock) is accepted only once, before
    loading, and only for a framework worker: forging it cannot reset the deadline."""
    started = time.monotonic()
    quick = replace(prepared, limits=replace(prepared.limits, timeout_s=1.5))
    report = grade_file(Path(__file__).resolve().parent / "hostile_framework" / "forge_ready.py", quick)
    assert time.monotonic() - started < 6
    assert not report.passed
    assert report.worker_status in ("protocol-error", "timeout")


def test_a_working_folder_with_unreadable_folders_is_removed() -> None:
    """A submission that made mode-000 folders (nested, and one with no listing right) must not
    leave its working folder behind; checked as an unprivileged uid, which has no override."""
    import os
    import tempfile

    base = tempfile.mkdtemp(prefix="grader-work-test-")
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            if os.geteuid() == 0:
                os.chown(base, 1000, 1000)
                os.setgroups([])
                os.setresgid(1000, 1000, 1000)
                os.setresuid(1000, 1000, 1000)
            os.makedirs(os.path.join(base, "a", "b", "c"))
            Path(base, "a", "b", "c", "f.txt").write_text("x")
            os.chmod(os.path.join(base, "a", "b", "c"), 0)
            os.chmod(os.path.join(base, "a", "b"), 0o300)
            os.chmod(os.path.join(base, "a"), 0)
            runner.remove_workdir(base)
            code = 0 if not os.path.exists(base) else 2
        finally:
            os._exit(code)
    os.close(read_fd)
    os.close(write_fd)
    _, status = os.waitpid(pid, 0)
    try:
        assert os.waitstatus_to_exitcode(status) == 0, "the working folder was left behind"
    finally:
        runner.remove_workdir(base)
