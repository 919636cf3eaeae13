"""The library entry point: grade submissions against a suite, one Report each.

The CLI is a thin layer over :func:`grade`; everything here can be used from Python too::

    from grader.api import grade, Options
    for report in grade([Path("submission.py")]):
        print(report.path, report.passed, [d.name for d in report.diagnoses])
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Callable, Iterator

from grader.frameworks import compile_allowance
from grader.notebook import remap_run
from grader.observation import CapturedOutput, ErrorInfo, LoadInfo, WorkerRun
from grader.probes import Probe, build_probes
from grader.refdata import ReferenceSet, load_default_suite, load_references
from grader.sandbox.forkserver import ForkServer
from grader.sandbox.policy import SandboxSettings
from grader.sandbox.runner import WorkerLimits, run_submission
from grader.submission import Submission, Unloadable, prepare_submission
from grader.suite import Suite

if TYPE_CHECKING:
    from grader.report.model import Report

# What judging needs and observing does not. Imported on first use, not with this module, so that
# a single cold `grade` can import them in the background while its one worker runs (see
# JudgementWarmer): about a third of a cold start's imports.
JUDGEMENT_MODULES = ("grader.checks", "grader.diagnosis.engine", "grader.diagnosis.locate", "grader.returns", "grader.report.model")

# How long importing torch / jax may take before the submission's own clock starts
# (measured: about 2 s for torch and 1 s for JAX on 2 cores; generous for a loaded CI machine).
FRAMEWORK_STARTUP_S = 60.0
# torch and JAX start a thread pool each (JAX about 17 threads, more while compiling); threads
# count against RLIMIT_NPROC, which as uid 65534 is shared by every worker on the machine.
FRAMEWORK_PROCESSES = 512


@dataclass(frozen=True)
class Options:
    """What a caller may change of the suite's settings for one run."""

    function: str | None = None  # overrides the suite's function name
    timeout_s: float | None = None  # overrides the suite's limits
    memory_mb: int | None = None
    strict_sandbox: bool = False  # refuse to run a submission without network, filesystem and process isolation
    framework: str | None = None  # overrides the suite's framework: auto, numpy, torch or jax


@dataclass(frozen=True)
class Prepared:
    """What grading needs once per run: the suite, its verified references and the probes."""

    suite: Suite
    refs: ReferenceSet
    probes: list[Probe]
    function: str
    limits: WorkerLimits
    sandbox: SandboxSettings = SandboxSettings()
    framework: str = "auto"


def prepare(suite: Suite | None = None, options: Options | None = None) -> Prepared:
    """Load and verify everything before the first submission runs.

    Raises SuiteError or ReferenceDataError (exit code 2) when the suite or references are bad.
    """
    options = options or Options()
    suite = suite or load_default_suite()
    refs = load_references(suite)
    limits = WorkerLimits(
        timeout_s=options.timeout_s if options.timeout_s is not None else suite.limits.timeout_s,
        memory_mb=options.memory_mb if options.memory_mb is not None else suite.limits.memory_mb,
        output_bytes=suite.limits.output_bytes,
    )
    # The references in use are hidden from the worker wherever the suite keeps them.
    sandbox = SandboxSettings(strict=options.strict_sandbox, hidden=(str(refs.directory),))
    function = options.function or suite.function
    return Prepared(suite, refs, build_probes(suite, refs), function, limits, sandbox, options.framework or suite.framework)


def _unloadable_run(problem: Unloadable) -> WorkerRun:
    """A submission that could not be prepared is a load error, reported without a worker."""
    load = LoadInfo(ok=False, reason="load-error", error=ErrorInfo(problem.error_type, problem.message))
    return WorkerRun("completed", load, {}, CapturedOutput("", 0, 0), 0.0)


@dataclass(frozen=True)
class Observed:
    """What the worker did with one submission, before any judgement: the grader's first half."""

    path: Path
    root: Path | None  # the candidate's folder when the file belongs to a repository checkout
    submission: Submission | Unloadable
    run: WorkerRun
    extra: dict[str, object]


def observe(
    path: Path,
    prepared: Prepared,
    root: Path | None = None,
    *,
    forkserver: ForkServer | None = None,
    on_waiting: Callable[[], None] | None = None,
    slot: AbstractContextManager[Any] | None = None,
) -> Observed:
    """Run one submission file (.py or notebook) in a worker (forked by ``forkserver`` if given)
    and collect what it did; ``on_waiting`` is called once only waiting is left, ``slot`` is held
    while it lives (see run_submission). Nothing here compares anything with the references."""
    submission = prepare_submission(path, prepared.framework, root)
    extra: dict[str, object] = {}
    if isinstance(submission, Unloadable):
        return Observed(path, root, submission, _unloadable_run(submission), extra)
    limits = prepared.limits
    if submission.framework != "numpy":
        shapes = {(p.Q.shape, p.K.shape, p.V.shape, None if p.mask is None else p.mask.shape) for p in prepared.probes}
        limits = replace(limits, startup_s=FRAMEWORK_STARTUP_S, timeout_s=limits.timeout_s + compile_allowance(submission.framework, len(shapes)))
    sandbox = prepared.sandbox
    if submission.framework != "numpy":
        sandbox = replace(sandbox, processes=max(sandbox.processes, FRAMEWORK_PROCESSES))
    run = run_submission(path, prepared.function, prepared.probes, limits, sandbox, submission.request(), forkserver=forkserver, on_waiting=on_waiting, slot=slot)
    if submission.notebook is not None:
        run = remap_run(run, submission.notebook, str(path.resolve().relative_to(submission.plan.root)))
        extra["notebook_code_cells"] = submission.notebook.code_cells
    extra["framework"] = submission.framework
    if root is not None:
        extra["candidate"] = str(root)
    return Observed(path, root, submission, run, extra)


def judge(observed: Observed, prepared: Prepared) -> Report:
    """Check and diagnose what ``observe`` collected: the grader's second half."""
    from grader.checks import run_checks
    from grader.diagnosis.engine import diagnose
    from grader.diagnosis.locate import attach_locations
    from grader.report.model import Report
    from grader.returns import split_returns

    suite, submission, run, extra = prepared.suite, observed.submission, observed.run, dict(observed.extra)
    if not isinstance(submission, Unloadable):
        run, order = split_returns(run, prepared.probes)
        if order is not None:
            extra["returns"] = "(output, weights)" if order == "output-first" else "(weights, output)"
    checks = run_checks(suite, prepared.refs, run, prepared.probes)
    notebook = None if isinstance(submission, Unloadable) else submission.notebook
    diagnoses = attach_locations(observed.path, diagnose(suite, prepared.probes, run, checks), prepared.function, notebook)
    passed = all(c.passed for c in checks) and not any(d.severity == "error" for d in diagnoses)
    return Report(
        path=str(observed.path),
        function=prepared.function,
        suite=suite.name,
        passed=passed,
        score=float(sum(c.points for c in checks)),
        max_score=suite.max_score,
        checks=tuple(checks),
        diagnoses=tuple(diagnoses),
        output=run.output,
        duration_s=run.duration_s,
        worker_status=run.status if not isinstance(submission, Unloadable) else "not-run",
        sandbox=run.sandbox,
        extra=extra,
    )


def grade_file(path: Path, prepared: Prepared, root: Path | None = None, *, forkserver: ForkServer | None = None) -> Report:
    """Grade one submission file (.py or notebook): observe it in a worker, then judge."""
    return judge(observe(path, prepared, root, forkserver=forkserver), prepared)


class JudgementWarmer:
    """Imports what judging needs (and ``more`` modules: the reporter's) in a background thread.

    Pass ``start`` as observe's ``on_waiting``: from then on the observing thread only waits (for
    the fork server, which early in a cold run may still be importing numpy, then for the
    worker), with the interpreter lock released, so the imports cost no time of their own;
    started earlier they would compete with building the worker's request. Call ``wait``
    before judging. Imports in two threads are safe: each module has its own import lock, and the
    observing side imports nothing new while it waits."""

    def __init__(self, *more: str) -> None:
        self.modules = (*JUDGEMENT_MODULES, *more)
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._load, name="warm-judgement", daemon=True)
            self.thread.start()

    def _load(self) -> None:
        import importlib

        for name in self.modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the import on first use reports it, in its place
                return

    def wait(self) -> None:
        if self.thread is not None:
            self.thread.join()


def error_report(path: Path, prepared: Prepared, message: str) -> Report:
    from grader.report.model import Report

    return Report(
        path=str(path), function=prepared.function, suite=prepared.suite.name, passed=False, score=0.0,
        max_score=prepared.suite.max_score, checks=(), diagnoses=(), output=CapturedOutput("", 0, 0),
        duration_s=0.0, worker_status="not-run", error=message,
    )


def grade(paths: list[Path], suite: Suite | None = None, options: Options | None = None) -> Iterator[Report]:
    """Grade every submission in ``paths`` (files, folders of them, checkouts: the rules of
    grader.discover), one Report each, in order. Raises UsageError before grading anything when
    a path is bad."""
    from grader.batch import grade_one  # batch imports this module
    from grader.discover import Rule, discover

    prepared = prepare(suite, options)
    for submission in discover(paths, Rule(function=prepared.function, entry=prepared.suite.entry)):
        yield grade_one(submission, prepared, None)[0]
