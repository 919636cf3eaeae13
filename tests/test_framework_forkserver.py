"""Framework fork servers: torch and JAX workers forked from a server that imported the framework
once grade like fresh workers, with every isolation layer; a server starts only for a framework
the batch has; where one cannot serve, the worker imports the framework itself and says so.

Each hostile submission here is bounded by itself (see tests/hostile/ and tests/hostile_framework/).
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import CORPUS, EXAMPLES, error_names
from grader.api import Options, Prepared, grade_file, prepare
from grader.discover import Rule, discover
from grader.pipeline import run
from grader.report.model import Report
from grader.sandbox import forkserver
from grader.sandbox.forkserver import FORK_SERVER_LAYER, SERVER_BOOT, ForkServers
from grader.sandbox.isolation import Layer
from grader.sandbox.compile_cache import LAYER as COMPILE_CACHE_LAYER

pytestmark = pytest.mark.framework

HOSTILE = Path(__file__).resolve().parent / "hostile"
HOSTILE_FRAMEWORK = Path(__file__).resolve().parent / "hostile_framework"
REQUIRE_FRAMEWORKS = os.environ.get("GRADER_REQUIRE_FRAMEWORKS") == "1"


def _installed(framework: str) -> bool:
    return importlib.util.find_spec(framework) is not None


def _needs(*frameworks: str) -> None:
    for framework in frameworks:
        if not _installed(framework):
            if REQUIRE_FRAMEWORKS:
                pytest.fail(f"{framework} is not installed but GRADER_REQUIRE_FRAMEWORKS=1")
            pytest.skip(f"{framework} is not installed")


def _framework_entries() -> dict[str, dict]:  # type: ignore[type-arg]
    """The torch and JAX examples of the corpus tables graded with the default suite, with their
    expected verdicts (which the fresh workers of test_corpus.py and test_forms.py are held to):
    every torch one, and the JAX ones of the forms table (a JAX worker compiles for seconds)."""
    entries = {}
    for table, prefix in ((CORPUS / "expected.yaml", ""), (CORPUS / "forms" / "expected.yaml", "forms/")):
        for key, want in yaml.safe_load(table.read_text()).items():
            if want.get("framework", want.get("requires")) != want.get("requires"):
                continue  # needs the framework installed, but is graded in NumPy (its tests import torch)
            if want.get("requires") == "torch" or want.get("requires") == "jax" and prefix:
                entries[prefix + want.get("path", key)] = want
    return entries


ENTRIES = _framework_entries()


def fork_entry(report: Report) -> Layer | None:
    return next((layer for layer in report.sandbox if layer.name == FORK_SERVER_LAYER), None)


def graded(paths: list[Path], prepared: Prepared, servers: ForkServers | None, jobs: int = 2) -> dict[Path, Report]:
    submissions = discover(paths, Rule(function=prepared.function))
    return {Path(report.path): report for _, report in run(submissions, prepared, jobs=jobs, forkserver=servers)}


@pytest.fixture(scope="module")
def servers() -> Iterator[ForkServers]:
    with ForkServers.start() as started:
        yield started


@pytest.fixture(scope="module")
def batches(prepared: Prepared, servers: ForkServers) -> tuple[dict[Path, Report], dict[Path, Report]]:
    """The whole framework corpus graded in one batch forked from the framework servers, and
    in one of fresh workers (no server: each imports its framework)."""
    wanted = [CORPUS / key for key, want in ENTRIES.items() if _installed(want["requires"])]
    return graded(wanted, prepared, servers), graded(wanted, prepared, None)


def _seen(report: Report) -> tuple[object, ...]:
    """Everything of a report that must not depend on how its worker started."""
    return (
        report.passed,
        report.score,
        report.worker_status,
        [(c.id, c.passed, c.points, c.summary) for c in report.checks],
        [(d.name, d.severity, d.message) for d in report.diagnoses],
        report.output.text,
        # Neither how the worker started nor whether it found its compilations in the batch's cache.
        [(layer.name, layer.active) for layer in report.sandbox if layer.name not in (FORK_SERVER_LAYER, COMPILE_CACHE_LAYER)],
    )


@pytest.mark.parametrize("key", sorted(ENTRIES))
def test_forked_and_fresh_framework_workers_grade_alike(key: str, batches: tuple[dict[Path, Report], dict[Path, Report]]) -> None:
    """Forked or fresh, the same report: so the verdicts the corpus tables give for fresh
    workers (test_corpus.py, test_forms.py) hold for forked ones."""
    want = ENTRIES[key]
    framework = want["requires"]
    _needs(framework)
    forked, fresh = batches[0][CORPUS / key], batches[1][CORPUS / key]
    assert _seen(forked) == _seen(fresh)
    assert forked.extra["framework"] == fresh.extra["framework"] == framework
    entry = fork_entry(forked)
    assert entry is not None and entry.active and entry.detail.startswith(f"forked from the {framework} server"), entry
    start = fork_entry(fresh)
    assert start is not None and not start.active
    assert start.detail == f"{framework} imported in this worker (a fresh interpreter): no fork server in this run"
    # The seed's bugs are named through either start.
    if key.endswith("_seed_bugs.py"):
        assert {"scale-by-dk", "batch-transpose"} <= set(error_names(forked))
    if want["passed"]:
        assert forked.passed


def test_a_server_starts_only_for_a_framework_the_batch_has(prepared: Prepared) -> None:
    _needs("torch")
    with ForkServers.start() as servers:
        numpy_only = graded([EXAMPLES / "correct.py", EXAMPLES / "seed_buggy.py"], prepared, servers)
        assert [numpy_only[EXAMPLES / name].passed for name in ("correct.py", "seed_buggy.py")] == [True, False]
        assert servers.started == {}  # no torch or JAX server for a NumPy batch
        assert all(fork_entry(r) is None for r in numpy_only.values())
        torch_files = [CORPUS / "forms" / name for name in ("torch_correct.py", "torch_module.py", "torch_seed_bugs.py")]
        reports = graded(torch_files, prepared, servers)
        assert [reports[p].passed for p in torch_files] == [True, True, False]
        assert set(servers.started) == {"torch"}  # one server, however many torch submissions
        assert servers.started["torch"].spawned == 3
        assert servers.notes() == []
        torch_server = servers.started["torch"]
    assert torch_server.proc.poll() is not None  # closed with the run


INTROSPECT = '''\
import os
import sys

import torch

print("threads at load:", len(os.listdir("/proc/self/task")), "intra-op:", torch.get_num_threads(), "inter-op:", torch.get_num_interop_threads())
print("modules:", sorted(m for m in sys.modules if m.startswith("grader")))
print("fds:", sorted(int(fd) for fd in os.listdir("/proc/self/fd")))
print("env:", sorted(os.environ))


def attention(Q, K, V):
    print("intra-op in the call:", torch.get_num_threads())
    scores = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5
    return torch.softmax(scores, dim=-1) @ V
'''


def test_a_forked_torch_worker_has_one_thread_and_nothing_of_the_grader(prepared: Prepared, servers: ForkServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _needs("torch")
    monkeypatch.setenv("GRADER_TEST_SECRET", "s3cr3t-token")
    path = tmp_path / "introspect_torch.py"
    path.write_text(INTROSPECT)
    report = graded([path], prepared, servers)[path]
    assert report.passed, report.output.text
    out = report.output.text
    assert "threads at load: 1 intra-op: 1 inter-op: 1" in out, out
    assert set(re.findall(r"intra-op in the call: (\d+)", out)) == {"1"}
    entry = fork_entry(report)
    assert entry is not None and entry.active
    modules = re.search(r"modules: (.*)", out)
    assert modules is not None
    for absent in ("grader.refdata", "grader.attention", "grader.api", "grader.checks", "grader.diagnosis", "grader.probes"):
        assert absent not in modules.group(1)
    fds = re.search(r"fds: \[(.*)\]", out)
    assert fds is not None and len(fds.group(1).split(",")) <= 6  # 0-2, request, result, the listing itself
    assert "GRADER_TEST_SECRET" not in out


@pytest.mark.parametrize(
    ("prefix", "why"),
    [
        # A thread alive in the server when a fork is asked for: it refuses.
        ("import threading, time; threading.Thread(target=time.sleep, args=(600,), daemon=True).start(); ", r"refused to fork: 2 threads alive in the server after importing torch"),
        # The framework's import fails in the server (it does not in the worker).
        ("import sys; sys.modules['torch'] = None; ", r"refused to fork: importing torch failed: ModuleNotFoundError"),
        # The server dies at its start.
        ("import os; os._exit(3); ", r"the torch server (ended \(exit code 3\)|could not fork a worker)"),
    ],
    ids=["threads-alive", "import-fails", "server-dies"],
)
def test_a_worker_the_framework_server_cannot_fork_imports_it_itself_and_says_why(prefix: str, why: str, prepared: Prepared, monkeypatch: pytest.MonkeyPatch) -> None:
    _needs("torch")
    with ForkServers.start() as servers:  # NumPy's server with the real boot
        monkeypatch.setattr(forkserver, "SERVER_BOOT", prefix + SERVER_BOOT)
        files = [CORPUS / "forms" / "torch_correct.py", CORPUS / "forms" / "torch_seed_bugs.py"]
        reports = graded(files, prepared, servers)
        assert [reports[p].passed for p in files] == [True, False]
        assert error_names(reports[files[1]]) == ["batch-transpose", "scale-by-dk"]
        for report in reports.values():
            entry = fork_entry(report)
            assert entry is not None and not entry.active
            assert entry.detail.startswith("torch imported in this worker (forked from the NumPy server): ")
            assert re.search(why, entry.detail), entry.detail
        (note,) = servers.notes()  # once per run, not per submission
        assert note.startswith("torch submissions were not forked from a torch server (") and re.search(why, note)


def test_the_cli_notes_a_fallback_once_on_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    _needs("torch")
    from grader.cli import cli

    monkeypatch.setattr(forkserver, "SERVER_BOOT", "import threading, time; threading.Thread(target=time.sleep, args=(600,), daemon=True).start(); " + SERVER_BOOT)
    files = [str(CORPUS / "forms" / name) for name in ("torch_correct.py", "torch_module.py")]
    result = CliRunner().invoke(cli, ["--no-cache", "--quiet", *files])
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("grade: note:")]
    assert len(lines) == 1 and "threads alive in the server after importing torch" in lines[0], result.stderr


def test_the_unprivileged_way_forks_framework_workers_too(prepared: Prepared) -> None:
    """As root, the servers can also take the way an unprivileged grader takes (a user and PID
    namespace of their own, the worker pids sent in credentials): torch's too."""
    _needs("torch")
    if os.geteuid() != 0:
        pytest.skip("unprivileged already: every test here takes that way")
    from grader.sandbox.isolation import FORKED_AS_INIT

    path = CORPUS / "forms" / "torch_seed_bugs.py"
    with ForkServers.start(own_namespaces=True) as servers:
        report = graded([path], prepared, servers)[path]
    assert error_names(report) == ["batch-transpose", "scale-by-dk"]
    entry = fork_entry(report)
    assert entry is not None and entry.active
    pid_namespace = next(layer for layer in report.sandbox if layer.name == "pid-namespace")
    if pid_namespace.detail != FORKED_AS_INIT:
        pytest.skip(f"no namespaces for the server here; the worker reports: {pid_namespace.detail}")


def test_an_unknown_framework_has_no_server(servers: ForkServers) -> None:
    server, why = servers._server("mxnet")
    assert server is None and why == "no fork server serves 'mxnet'"
    assert "mxnet" not in servers.started


# ------------------------------------------------------------------------------------------------
# Hostile submissions, forked from the torch server
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def as_torch() -> Prepared:
    """Every submission graded as a torch one (its inputs are tensors), with short limits."""
    prepared = prepare(None, Options(framework="torch"))
    return replace(prepared, limits=replace(prepared.limits, timeout_s=2.0))


@pytest.fixture(scope="module")
def hostile(as_torch: Prepared, servers: ForkServers) -> dict[str, Report]:
    if not _installed("torch"):
        return {}
    names = ["steal_references.py", "print_env.py", "forge_sandbox.py", "kill_parent.py", "segfault.py", "escape_setsid.py"]
    os.environ["GRADER_CI_SECRET"] = "hostile-framework-secret"  # the grader's environment, never the worker's
    try:
        reports = graded([HOSTILE / name for name in names] + [HOSTILE_FRAMEWORK / "forge_ready.py"], as_torch, servers)
    finally:
        del os.environ["GRADER_CI_SECRET"]
    return {path.name: report for path, report in reports.items()}


def _carrying(marker: str) -> list[str]:
    """The pids of the machine whose process name is ``marker``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as handle:
                found += [pid] if handle.read().strip() == marker else []
        except OSError:
            continue
    return found


def _active(report: Report) -> set[str]:
    return {layer.name for layer in report.sandbox if layer.active}


def test_hostile_torch_submissions_were_forked_from_the_torch_server(hostile: dict[str, Report]) -> None:
    _needs("torch")
    for name, report in hostile.items():
        if name != "forge_sandbox.py":  # its run is refused as a whole (below)
            entry = fork_entry(report)
            assert entry is not None and entry.active, (name, entry)
        assert report.extra["framework"] == "torch"
        assert not report.passed or name == "print_env.py", name


def test_a_forked_torch_worker_cannot_read_or_replay_the_references(hostile: dict[str, Report]) -> None:
    _needs("torch")
    report = hostile["steal_references.py"]
    out = report.output.text
    assert "import grader.attention: failed" in out
    assert "grader.attention in memory: failed" in out and "grader.refdata in memory: failed" in out
    if {"landlock-fs", "mount-namespace"} & _active(report):
        assert "SUCCEEDED" not in out, out
    assert "stolen outputs: 0" in out and "FOUND" not in out
    assert "values-mismatch" in error_names(report)


def test_a_forked_torch_worker_sees_no_secret(hostile: dict[str, Report]) -> None:
    _needs("torch")
    out = hostile["print_env.py"].output.text
    assert "environ of self" in out  # it did look
    assert "hostile-framework-secret" not in out and "GRADER_CI_SECRET" not in out


def test_forged_messages_gain_nothing_in_a_forked_torch_worker(hostile: dict[str, Report]) -> None:
    _needs("torch")
    sandbox = hostile["forge_sandbox.py"]
    assert sandbox.worker_status == "protocol-error" and not any(layer.detail == "forged" for layer in sandbox.sandbox)
    ready = hostile["forge_ready.py"]
    # Refused as a second "ready", or stopped at the deadline it could not reset.
    assert not ready.passed and ready.worker_status in ("protocol-error", "timeout")
    assert ready.duration_s < 2.0 + 3


def test_a_torch_worker_that_kills_or_crashes_costs_only_its_own_result(hostile: dict[str, Report], as_torch: Prepared, servers: ForkServers) -> None:
    _needs("torch")
    assert error_names(hostile["segfault.py"]) == ["crash"]
    assert "kill parent" in hostile["kill_parent.py"].output.text
    assert error_names(hostile["escape_setsid.py"]) == ["timeout"]
    marker = re.search(r"MARKER (hx[0-9a-f]{10})", hostile["escape_setsid.py"].output.text)
    assert marker is not None
    deadline = time.monotonic() + 5.0
    while _carrying(marker.group(1)) and time.monotonic() < deadline:  # the kernel reaps in the background
        time.sleep(0.1)
    assert _carrying(marker.group(1)) == []  # the escaper died with its worker's namespace (or the sweep)
    # The server lives on and forks the next one.
    before = servers.started["torch"].spawned
    report = graded([CORPUS / "forms" / "torch_correct.py"], as_torch, servers)[CORPUS / "forms" / "torch_correct.py"]
    assert report.passed and servers.started["torch"].spawned == before + 1
