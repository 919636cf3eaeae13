"""Grading, top to bottom: the way every submission goes, graded alone or in a batch of hundreds.

    paths --discover--> submissions                  grader.discover
    suite + options --prepare--> Prepared            grader.prepare, once per run
    run(submissions, prepared), for each submission:
        cache lookup                                 grader.cache: a hit is the report
        observe: a worker runs it on the probes      observe(), the only step that runs it
        judge: the checks, then the diagnosis        judge(), plain functions in this process
        cache store
        -> (index, Report) yielded as soon as it is known: the caller hands it to the reporters

``grader.api.grade`` and the ``grade`` command both go through :func:`run`. With one job (or one
submission to grade) everything happens in the calling thread. With more, a pool of threads
grades up to ``jobs`` submissions at once (the worker slots of grader.slots): a thread feeds its
worker, gives its slot up once the worker is done and judges what it saw, so the next worker
starts while this process judges. Judging holds the interpreter lock and workers are processes
of their own: together they keep every core busy, where one slot from start to report would
leave a core idle whenever the threads happen to judge at the same time.

Every submission runs in its own worker process (forked by the fork server when there is one),
so one that hangs, crashes or eats memory costs only its own result: the worker's deadline and
limits end it and the others go on. A failure of the grader itself on one submission is that
submission's report (an error), never the end of the run.

Ctrl-C (KeyboardInterrupt) stops cleanly wherever it lands, in :func:`run` or in the caller
while it handles a result (the caller then closes the generator): no new submission starts, the
running workers are killed (by closing the fork server) and their half-done results dropped.
What was yielded before is the caller's to keep.
"""

from __future__ import annotations

import concurrent.futures as futures
import importlib.util
import os
import re
import sysconfig
import threading
from importlib.machinery import ModuleSpec, PathFinder
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generator, NamedTuple

import numpy as np

from grader.cache import ResultCache
from grader.checks import run_checks
from grader.diagnosis import load_fixes
from grader.diagnosis.engine import diagnose
from grader.diagnosis.attach import attach_locations
from grader.discover import Submission, TooLarge
from grader.errors import GraderEnvironmentError, GraderError
from grader.frameworks import compile_allowance
from grader.jax_cache import JaxCompileCache
from grader.notebook import remap_run
from grader.observation import CapturedOutput, ErrorInfo, LoadInfo, WorkerRun
from grader.prepare import Prepared
from grader.report.model import NOT_GRADED, UNREACHED, Report
from grader.returns import split_returns
from grader.sandbox.env import import_path
from grader.sandbox.forkserver import ForkServer, ForkServers
from grader.sandbox.policy import hidden_paths
from grader.sandbox.runner import run_submission
from grader.slots import Slots, Ticket
from grader.submission import Submission as Loadable, Unloadable, prepare_submission

# How long a framework worker may take to get torch / jax ready before the submission's own
# clock starts (at "ready"): importing it (about 2 s for torch and 1 s for JAX on 2 cores) when
# the worker was not forked from its framework's server, else only starting it (JAX's CPU
# backend: a few hundredths of a second). The worker sends "ready" before it loads the
# submission, so the allowance is never the submission's time, and one bound serves both: the
# grader learns which it got only from the fork server, once the worker runs. Generous for a
# loaded CI machine.
FRAMEWORK_STARTUP_S = 60.0
# torch and JAX start a thread pool each (JAX about 17 threads, more while compiling); threads
# count against RLIMIT_NPROC, which as uid 65534 is shared by every worker on the machine.
FRAMEWORK_PROCESSES = 512


class Graded(NamedTuple):
    """A submission's report, and whether it may be cached: not a failure of the grader itself,
    and not a timeout, which depends on how loaded the machine was."""

    report: Report
    cacheable: bool


@dataclass(frozen=True)
class Observed:
    """What the worker did with one submission, before any judgement: the grader's first half."""

    path: Path
    root: Path | None  # the candidate's folder when the file belongs to a repository checkout
    submission: Loadable | Unloadable  # as grader.submission prepared it
    run: WorkerRun
    extra: dict[str, object]
    alone: bool = False  # a file of a folder of submissions: its worker saw no other file


def run(
    submissions: list[Submission],
    prepared: Prepared,
    *,
    jobs: int = 1,
    cache: ResultCache | None = None,
    forkserver: ForkServer | ForkServers | None = None,
) -> Generator[tuple[int, Report], None, None]:
    """Grade ``submissions``, yielding (index in ``submissions``, report) for each as soon as it
    is known: the cached ones first, then the others in the order they finish (submission order
    with one job). At most ``jobs`` workers run at once. ``forkserver``: the run's fork servers
    (ForkServers: NumPy's, and torch's or JAX's started by the first submission that needs
    one), or a single NumPy server; without, every worker is a fresh interpreter."""
    if cache is not None:
        prepared = _hiding(prepared, cache.directory)
    todo: list[tuple[int, str | None]] = []  # (index, cache key)
    for index, submission in enumerate(submissions):
        key = _cache_key(cache, submission)
        hit = cache.get(key, prepared.suite.name) if cache is not None and key is not None else None
        if hit is not None:
            yield index, _labelled(hit, submission, cached=True)
        else:
            todo.append((index, key))
    if jobs <= 1 or len(todo) <= 1:
        # In this thread: no pool to start for one submission (the cold single-file case), and
        # Ctrl-C reaches run_submission, whose cleanup kills the worker.
        for index, key in todo:
            yield index, _stored(cache, key, submissions[index], grade_one(submissions[index], prepared, forkserver))
    else:
        yield from _in_parallel(todo, submissions, prepared, jobs, cache, forkserver)


def _hiding(prepared: Prepared, folder: Path) -> Prepared:
    """``prepared`` with ``folder`` (the result cache) hidden from every worker, even where it lies
    below a folder the worker may read; made first, since only an existing path can be hidden."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return prepared  # then nothing is cached there either
    return replace(prepared, sandbox=replace(prepared.sandbox, hidden=(*prepared.sandbox.hidden, str(folder))))


def _cache_key(cache: ResultCache | None, submission: Submission) -> str | None:
    """None when nothing is looked up or stored: no cache, no file to grade, a file unreadable
    now or a huge checkout (graded all the same)."""
    if cache is None or submission.file is None:
        return None
    try:
        return cache.key(submission.content_hash())
    except (OSError, TooLarge):
        return None


def _stored(cache: ResultCache | None, key: str | None, submission: Submission, graded: Graded) -> Report:
    if cache is not None and key is not None and graded.cacheable:
        cache.put(key, graded.report)
    return _labelled(graded.report, submission)


def _in_parallel(
    todo: list[tuple[int, str | None]],
    submissions: list[Submission],
    prepared: Prepared,
    jobs: int,
    cache: ResultCache | None,
    forkserver: ForkServer | ForkServers | None,
) -> Generator[tuple[int, Report], None, None]:
    """run() with a pool of threads and ``jobs`` worker slots, granted in submission order."""
    stopping = threading.Event()
    slots = Slots(jobs, stopping)
    compiled = JaxCompileCache()  # filled when the batch's third JAX submission is about to run, if one is

    def work(index: int, ticket: Ticket) -> Graded:
        try:
            if stopping.is_set():
                raise futures.CancelledError
            observed = observe_one(submissions[index], prepared, forkserver, slot=ticket, compiled=compiled)
        finally:
            ticket.settle()
        return judge_one(observed, prepared)  # without the slot: the next worker starts meanwhile

    # Twice as many threads as slots: while one thread judges, another holds its slot.
    pool = futures.ThreadPoolExecutor(max_workers=2 * jobs, thread_name_prefix="grade")
    pending = {pool.submit(work, index, slots.ticket(number)): (index, key) for number, (index, key) in enumerate(todo)}
    try:
        # as_completed waits on every future once (a wait() per result would be quadratic), and
        # Ctrl-C interrupts its wait.
        for future in futures.as_completed(list(pending)):
            index, key = pending.pop(future)
            yield index, _stored(cache, key, submissions[index], future.result())
    finally:
        if pending:  # stopped before the end: Ctrl-C, here or in the caller
            stopping.set()
            slots.stop()  # threads waiting for a slot give up
            for future in pending:
                future.cancel()
            if forkserver is not None:
                forkserver.close()  # kills every running worker's process group
        pool.shutdown(wait=True, cancel_futures=True)  # results that arrive now are dropped
        compiled.close()


def grade_one(submission: Submission, prepared: Prepared, forkserver: ForkServer | ForkServers | None = None) -> Graded:
    """One discovered submission, observed and then judged."""
    return judge_one(observe_one(submission, prepared, forkserver), prepared)


def observe_one(
    submission: Submission,
    prepared: Prepared,
    forkserver: ForkServer | ForkServers | None,
    slot: AbstractContextManager[Any] | None = None,
    compiled: JaxCompileCache | None = None,
) -> Observed | Graded:
    """What observe() saw of ``submission``, or its finished (uncacheable) report when there is
    nothing to run or the grader failed on it."""
    if submission.file is None:
        return Graded(error_report(Path(submission.label), prepared, submission.error or "nothing to grade"), False)
    try:
        return observe(submission.file, prepared, root=submission.folder, forkserver=forkserver, slot=slot, alone=submission.loose, compiled=compiled)
    except GraderEnvironmentError as exc:  # not graded, not cached; the run exits 2 (see cli)
        return Graded(error_report(submission.file, prepared, str(exc), environment=True), False)
    except GraderError as exc:
        return Graded(error_report(submission.file, prepared, str(exc)), False)
    except Exception as exc:  # a bug of ours on this one submission: report it, grade the rest
        return Graded(error_report(submission.file, prepared, _internal_error(exc)), False)


def observe(
    path: Path,
    prepared: Prepared,
    root: Path | None = None,
    *,
    forkserver: ForkServer | ForkServers | None = None,
    slot: AbstractContextManager[Any] | None = None,
    alone: bool = False,
    compiled: JaxCompileCache | None = None,
) -> Observed:
    """Run one submission file (.py or notebook) in a worker (forked by ``forkserver`` if given)
    and collect what it did; ``slot`` is held while the worker lives (see run_submission);
    ``alone``: the worker may read the file but not its folder (one of many in a batch folder);
    ``compiled``: a batch's JAX compile cache (grader.jax_cache), for a JAX submission.
    Nothing here compares anything with the references. Raises SandboxError when no worker can
    run it (for example --strict-sandbox without isolation)."""
    submission = prepare_submission(path, prepared.framework, root, alone=alone)
    extra: dict[str, object] = {}
    if isinstance(submission, Unloadable):
        return Observed(path, root, submission, _unloadable_run(submission), extra, alone)
    limits, sandbox = prepared.limits, prepared.sandbox
    if submission.framework != "numpy":
        shapes = {(p.Q.shape, p.K.shape, p.V.shape, None if p.mask is None else p.mask.shape) for p in prepared.probes}
        limits = replace(limits, startup_s=FRAMEWORK_STARTUP_S, timeout_s=limits.timeout_s + compile_allowance(submission.framework, len(shapes)))
        sandbox = replace(sandbox, processes=max(sandbox.processes, FRAMEWORK_PROCESSES))
        if submission.framework == "jax" and compiled is not None:
            sandbox = replace(sandbox, compiled=compiled.folder(prepared.probes))
    run = run_submission(path, prepared.function, prepared.probes, limits, sandbox, submission.request(), forkserver=forkserver, slot=slot, alone=alone)
    problem = environment_problem(path, run.load, (str(root or path.resolve().parent), *hidden_paths(sandbox.hidden)))
    if problem is not None:
        raise GraderEnvironmentError(problem)
    if submission.notebook is not None:
        run = remap_run(run, submission.notebook, str(path.resolve().relative_to(submission.plan.root)))
        extra["notebook_code_cells"] = submission.notebook.code_cells
    extra["framework"] = submission.framework
    if root is not None:
        extra["candidate"] = str(root)
    return Observed(path, root, submission, run, extra, alone)


def _unloadable_run(problem: Unloadable) -> WorkerRun:
    """A submission that could not be prepared is a load error, reported without a worker."""
    load = LoadInfo(ok=False, reason="load-error", error=ErrorInfo(problem.error_type, problem.message))
    return WorkerRun("completed", load, {}, CapturedOutput("", 0, 0), 0.0)


def judge_one(observed: Observed | Graded, prepared: Prepared) -> Graded:
    """judge() for what observe_one() gave (a finished report passes through)."""
    if isinstance(observed, Graded):
        return observed
    try:
        report = judge(observed, prepared)
    except GraderError as exc:
        return Graded(error_report(observed.path, prepared, str(exc)), False)
    except Exception as exc:  # see observe_one
        return Graded(error_report(observed.path, prepared, _internal_error(exc)), False)
    return Graded(report, report.worker_status != "timeout")


def judge(observed: Observed, prepared: Prepared) -> Report:
    """Check and diagnose what ``observe`` collected: the grader's second half."""
    submission, run, extra = observed.submission, observed.run, dict(observed.extra)
    # A NumPy submission has no autograd: the gradient checks are absent for it (not failed), so
    # they neither score nor count toward its maximum (Suite.for_framework).
    framework = submission.framework if not isinstance(submission, Unloadable) else prepared.framework
    suite = prepared.suite.for_framework(framework)
    if not isinstance(submission, Unloadable):
        run, order = split_returns(run, prepared.probes)
        if order is not None:
            extra["returns"] = "(output, weights)" if order == "output-first" else "(weights, output)"
    # The arithmetic on a candidate's values (inf, NaN, 1e308) is deliberate: every result of it
    # is judged, and numpy's floating-point remarks on it are not the grader's to print.
    with np.errstate(all="ignore"):
        checks = run_checks(suite, prepared.refs, run, prepared.probes)
        notebook = None if isinstance(submission, Unloadable) else submission.notebook
        graded_in = None if isinstance(submission, Unloadable) else submission.framework  # the fixes' words
        ran_in = None if isinstance(submission, Unloadable) else submission.plan.root  # the worker's files are relative to it
        diagnoses = attach_locations(observed.path, diagnose(suite, prepared.probes, run, checks), prepared.function, notebook, graded_in, ran_in)
        diagnoses = load_fixes.placed(diagnoses, observed.path, observed.alone, observed.root is not None)
    passed = all(c.passed for c in checks) and not any(d.severity == "error" for d in diagnoses)
    return Report(
        path=str(observed.path),
        function=prepared.function,
        suite=suite.name,
        passed=passed,
        score=float(sum(c.points for c in checks)),
        max_score=suite.max_score,  # of the checks that apply to this submission's framework
        checks=tuple(checks),
        diagnoses=tuple(diagnoses),
        output=run.output,
        duration_s=run.duration_s,
        worker_status=run.status if not isinstance(submission, Unloadable) else "not-run",
        sandbox=run.sandbox,
        extra=extra,
    )


def grade_file(path: Path, prepared: Prepared, root: Path | None = None, *, forkserver: ForkServer | ForkServers | None = None) -> Report:
    """Grade one submission file (.py or notebook): observe it in a worker, then judge. Raises
    GraderError when the grader cannot (grade_one reports that as the submission's error)."""
    return judge(observe(path, prepared, root, forkserver=forkserver), prepared)


def error_report(path: Path, prepared: Prepared, message: str, environment: bool = False) -> Report:
    """The report of a submission the grader could not grade (``environment``: because of the
    grader's own installation, see environment_problem)."""
    return Report(
        path=str(path), function=prepared.function, suite=prepared.suite.name, passed=False, score=0.0,
        max_score=prepared.suite.max_score_for(prepared.framework), checks=(), diagnoses=(), output=CapturedOutput("", 0, 0),
        duration_s=0.0, worker_status="not-run", error=message, extra={NOT_GRADED: "environment"} if environment else {},
    )


def is_environment_error(report: Report) -> bool:
    return report.extra.get(NOT_GRADED) == "environment"


def unreached_report(submission: Submission, prepared: Prepared) -> Report:
    """The row of a submission an interrupted run never came to: only the reports that list
    every submission (the CSV gradebook, JUnit) show it (grader.report.sinks)."""
    report = error_report(submission.file or Path(submission.label), prepared, "not graded: the run was interrupted before its turn")
    return replace(report, extra={NOT_GRADED: UNREACHED})




_IMPORT_FAILURES = ("ModuleNotFoundError", "ImportError", "PermissionError")
_QUOTED = re.compile(r"'([^']+)'")
_ABSOLUTE = re.compile(r"(/[^\s'\":()]+)")


def environment_problem(path: Path, load: LoadInfo | None, foreign: tuple[str, ...] = ()) -> str | None:
    """The one line to report when the worker could not load ``path`` because it could not import
    a module that this process, the grader, can (found here without importing it): the grader's
    environment is at fault, not the candidate. None when the failure is the candidate's: any
    other error, a module the grader cannot find either, one that lies in the current folder or
    in ``foreign`` folders (the submission's own, the hidden ones), and an import error that the
    submission's code raised itself rather than an import statement."""
    error = load.error if load is not None and not load.ok and load.reason == "load-error" else None
    if error is None or error.type.rsplit(".", 1)[-1] not in _IMPORT_FAILURES:
        return None
    if error.frames and "import" not in str(error.frames[-1].get("code", "")):
        return None  # raised by the submission's own code (a read of a file, a raise), not an import
    folders = import_path()
    name = _failed_module(error.type, error.message, folders)
    where = _spec_location(_grader_spec(name, folders)) if name else None
    if name is None or where is None or any(_beneath(where, os.path.realpath(f)) for f in foreign):
        return None
    return (
        f"{path}: not graded: the sandboxed worker cannot import {name} ({error.short}), which the grader's Python "
        f"imports from {where}: this is the grader's environment, not the submission; make that folder readable "
        f"for every user (chmod -R a+rX) or install {name.split('.')[0]} into "
        f"{sysconfig.get_paths().get('purelib', 'the site-packages of the grader')}, then grade again"
    )


def _beneath(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _failed_module(kind: str, message: str, folders: tuple[str, ...]) -> str | None:
    """The module an import error is about: named in the message, or the top-level module whose
    file the message names inside one of the grader's import folders."""
    quoted = _QUOTED.findall(message)
    if kind.endswith("ModuleNotFoundError") and quoted:
        return quoted[0]
    if kind.endswith("ImportError") and "(unknown location)" in message and len(quoted) >= 2:
        return quoted[1]  # cannot import name 'x' from 'package' (unknown location): a folder it could not list
    for text in [*quoted, *_ABSOLUTE.findall(message)]:
        if not text.startswith("/"):
            continue
        real = os.path.realpath(text)
        for folder in folders:
            if real != folder and _beneath(real, folder):
                return os.path.relpath(real, folder).split(os.sep)[0].split(".")[0] or None
    return None


def _grader_spec(name: str, folders: tuple[str, ...]) -> ModuleSpec | None:
    """Where this process would import ``name`` from, without importing it or any parent: the
    top-level module in the grader's import folders (else through every finder, an editable
    install's too), each submodule in its parent's folders."""
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts) or parts[0] == "grader":
        return None
    try:
        spec = PathFinder.find_spec(parts[0], list(folders)) or importlib.util.find_spec(parts[0])
        for depth in range(1, len(parts)):
            if spec is None or not spec.submodule_search_locations:
                return None
            spec = PathFinder.find_spec(".".join(parts[: depth + 1]), list(spec.submodule_search_locations))
    except (ImportError, ValueError, AttributeError):
        return None
    return spec


def _spec_location(spec: ModuleSpec | None) -> str | None:
    """The canonical folder (package) or file (module) a spec loads from; None for built-in and
    frozen modules, which the worker has anyway, and for what the current folder itself holds
    (found through its entry on sys.path; a virtual environment below it is an ordinary install)."""
    if spec is None:
        return None
    if spec.submodule_search_locations:
        where = next(iter(spec.submodule_search_locations), None)
    else:
        where = spec.origin if spec.has_location else None
    if not where or not os.path.isabs(where):
        return None
    real = os.path.realpath(where)
    return None if os.path.dirname(real) == os.path.realpath(os.getcwd()) else real


def _internal_error(exc: Exception) -> str:
    return f"internal error of the grader: {type(exc).__name__}: {exc}"


# The other files defining the function that a report names (a checkout has seldom more).
MAX_PASSED_OVER = 5


def _labelled(report: Report, submission: Submission, cached: bool = False) -> Report:
    """The report under the submission's current name (a cached one may come from another path:
    its locations, which name the file it was graded as, are moved along)."""
    path = str(submission.file) if submission.file is not None else submission.label
    extra = {k: v for k, v in report.extra.items() if k not in ("candidate", "cached", "also_defined_in")}
    if submission.folder is not None:
        extra["candidate"] = submission.label
        if submission.passed_over:
            extra["also_defined_in"] = [f.relative_to(submission.folder).as_posix() for f in submission.passed_over[:MAX_PASSED_OVER]]
    if cached:
        extra["cached"] = True
    diagnoses = report.diagnoses
    if path != report.path:
        diagnoses = tuple(
            replace(d, location=replace(d.location, file=path)) if d.location is not None and d.location.file == report.path else d
            for d in diagnoses
        )
    return replace(report, path=path, extra=extra, diagnoses=diagnoses)
