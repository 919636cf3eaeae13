"""The library entry point: grade submissions against a suite, one Report each.

The CLI is a thin layer over :func:`grade`; everything here can be used from Python too::

    from grader.api import grade, Options
    for report in grade([Path("submission.py")]):
        print(report.path, report.passed, [d.name for d in report.diagnoses])
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from grader.checks import run_checks
from grader.diagnosis.engine import diagnose
from grader.errors import UsageError
from grader.observation import CapturedOutput
from grader.probes import Probe, build_probes
from grader.refdata import ReferenceSet, load_default_suite, load_references
from grader.report.model import Report
from grader.sandbox.forkserver import ForkServer
from grader.sandbox.runner import WorkerLimits, run_submission
from grader.suite import Suite


@dataclass(frozen=True)
class Options:
    function: str | None = None  # overrides the suite's function name
    timeout_s: float | None = None  # overrides the suite's limits
    memory_mb: int | None = None


@dataclass(frozen=True)
class Prepared:
    """What grading needs once per run: the suite, its verified references and the probes."""

    suite: Suite
    refs: ReferenceSet
    probes: list[Probe]
    function: str
    limits: WorkerLimits


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
    return Prepared(suite, refs, build_probes(suite, refs), options.function or suite.function, limits)


def check_path(path: Path) -> None:
    """Raises UsageError (one line) when ``path`` cannot be a submission file."""
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder")
    if path.is_dir():
        raise UsageError(f"{path}: is a folder; give a .py submission file")
    if path.suffix != ".py":
        raise UsageError(f"{path}: not a Python file (.py)")


def grade_file(path: Path, prepared: Prepared, *, forkserver: ForkServer | None = None) -> Report:
    """Grade one submission file: run it in a worker (forked by ``forkserver`` if given), check,
    diagnose."""
    suite = prepared.suite
    run = run_submission(path, prepared.function, prepared.probes, prepared.limits, forkserver=forkserver)
    checks = run_checks(suite, prepared.refs, run)
    diagnoses = diagnose(suite, prepared.probes, run, checks)
    passed = all(c.passed for c in checks) and not any(d.severity == "error" for d in diagnoses)
    return Report(
        path=str(path),
        function=prepared.function,
        suite=suite.name,
        passed=passed,
        score=float(sum(c.points for c in checks)),
        max_score=suite.max_score,
        checks=tuple(checks),
        diagnoses=tuple(diagnoses),
        output=run.output,
        duration_s=run.duration_s,
        worker_status=run.status,
        sandbox=run.sandbox,
    )


def error_report(path: Path, prepared: Prepared, message: str) -> Report:
    return Report(
        path=str(path), function=prepared.function, suite=prepared.suite.name, passed=False, score=0.0,
        max_score=prepared.suite.max_score, checks=(), diagnoses=(), output=CapturedOutput("", 0, 0),
        duration_s=0.0, worker_status="not-run", error=message,
    )


def grade(paths: list[Path], suite: Suite | None = None, options: Options | None = None) -> Iterator[Report]:
    """Grade each path in order. Raises UsageError before grading anything if a path is bad."""
    for path in paths:
        check_path(path)
    prepared = prepare(suite, options)
    for path in paths:
        yield grade_file(path, prepared)
