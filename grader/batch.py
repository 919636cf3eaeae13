"""Grading many submissions: in parallel, each result kept as soon as it is known.

Every submission runs in its own worker process (forked by the fork server when there is one),
so one that hangs, crashes or eats memory costs only its own result: the worker's deadline and
limits end it and the others go on. The grader's side of each submission (feeding the worker,
checking, diagnosing) runs in a thread of this process; the threads mostly wait on their
worker's pipes.

Results reach the caller's ``on_result`` from the calling thread, in the order they finish, and go
into the cache at once. Ctrl-C (KeyboardInterrupt) stops cleanly: no new submission starts, the
running workers are killed (by closing the fork server), their half-done results are dropped, and
what was finished is returned with ``interrupted`` set.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Callable

from grader.api import JudgementWarmer, Observed, Prepared, error_report, judge, observe
from grader.discover import Submission, TooLarge
from grader.errors import GraderError, SandboxError
from grader.sandbox.forkserver import ForkServer

if TYPE_CHECKING:  # the report side is imported while the first worker runs (JudgementWarmer)
    from grader.cache import ResultCache
    from grader.report.model import Report

# The interpreter's switch interval while a batch runs (the default is 5 ms); see run_batch.
SWITCH_INTERVAL_S = 0.001

OnResult = Callable[[int, "Report"], None]


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class BatchOutcome:
    """The reports of a batch, and whether Ctrl-C cut it short."""

    reports: dict[int, Report]  # by the submission's index in the discovered list
    interrupted: bool
    total: int

    def ordered(self) -> list[Report]:
        return [self.reports[i] for i in sorted(self.reports)]


def _labelled(report: Report, submission: Submission, cached: bool = False) -> Report:
    """The report under the submission's current name (a cached one may come from another path:
    its locations, which name the file it was graded as, are moved along)."""
    path = str(submission.file) if submission.file is not None else submission.label
    extra = {k: v for k, v in report.extra.items() if k not in ("candidate", "cached")}
    if submission.folder is not None:
        extra["candidate"] = submission.label
    if cached:
        extra["cached"] = True
    diagnoses = report.diagnoses
    if path != report.path:
        diagnoses = tuple(
            replace(d, location=replace(d.location, file=path)) if d.location is not None and d.location.file == report.path else d
            for d in diagnoses
        )
    return replace(report, path=path, extra=extra, diagnoses=diagnoses)


def grade_one(submission: Submission, prepared: Prepared, forkserver: ForkServer | None) -> tuple[Report, bool]:
    """The report, and whether it may be cached: not a failure of the grader itself, and not a
    timeout, which depends on how loaded the machine was."""
    observed = _observe_one(submission, prepared, forkserver)
    return observed if isinstance(observed, tuple) else _judge_one(observed, prepared)


def _observe_one(
    submission: Submission,
    prepared: Prepared,
    forkserver: ForkServer | None,
    on_waiting: Callable[[], None] | None = None,
    slot: AbstractContextManager[Any] | None = None,
) -> Observed | tuple[Report, bool]:
    """The worker's half of grade_one, or the finished (uncacheable) report when it failed."""
    if submission.file is None:
        return error_report(Path(submission.label), prepared, submission.error or "nothing to grade"), False
    try:
        return observe(submission.file, prepared, root=submission.folder, forkserver=forkserver, on_waiting=on_waiting, slot=slot)
    except GraderError as exc:
        return error_report(submission.file, prepared, str(exc)), False
    except Exception as exc:  # a bug of ours on this one submission: report it, grade the rest
        return error_report(submission.file, prepared, f"internal error of the grader: {type(exc).__name__}: {exc}"), False


def _judge_one(observed: Observed, prepared: Prepared) -> tuple[Report, bool]:
    try:
        report = judge(observed, prepared)
        return report, report.worker_status != "timeout"
    except GraderError as exc:
        return error_report(observed.path, prepared, str(exc)), False
    except Exception as exc:  # see _observe_one
        return error_report(observed.path, prepared, f"internal error of the grader: {type(exc).__name__}: {exc}"), False


class _Slots:
    """At most ``count`` workers at once, granted in the order of the submissions' tickets.

    A submission prepares its request before it asks for a slot (that work needs no worker), so
    the requests may become ready in any order; the slots still go out in submission order, or a
    late first submission could wait behind every slow one after it. A ticket given up (the
    submission failed before it needed a worker) lets the next one go. Once ``stopping`` is set
    (Ctrl-C), no new worker starts."""

    def __init__(self, count: int, stopping: threading.Event) -> None:
        self.free = count
        self.stopping = stopping
        self.turn = 0  # the next ticket to serve
        self.given_up: set[int] = set()
        self.changed = threading.Condition()

    def ticket(self, number: int) -> _Ticket:
        return _Ticket(self, number)

    def _advance(self) -> None:
        while self.turn in self.given_up:
            self.given_up.discard(self.turn)
            self.turn += 1

    def acquire(self, number: int) -> None:
        with self.changed:
            self.changed.wait_for(lambda: self.stopping.is_set() or (self.free > 0 and self.turn == number))
            if self.stopping.is_set():
                raise SandboxError("grading was stopped")
            self.free -= 1
            self.turn += 1
            self._advance()
            self.changed.notify_all()

    def release(self) -> None:
        with self.changed:
            self.free += 1
            self.changed.notify_all()

    def give_up(self, number: int) -> None:
        with self.changed:
            if number >= self.turn:
                self.given_up.add(number)
                self._advance()
                self.changed.notify_all()

    def stop(self) -> None:
        with self.changed:
            self.changed.notify_all()


class _Ticket:
    """One submission's claim on a slot: a context manager for run_submission."""

    def __init__(self, slots: _Slots, number: int) -> None:
        self.slots = slots
        self.number = number
        self.held = self.used = False

    def __enter__(self) -> None:
        self.used = True
        self.slots.acquire(self.number)
        self.held = True

    def __exit__(self, *exc: object) -> None:
        if self.held:
            self.held = False
            self.slots.release()

    def settle(self) -> None:
        """Give the turn up if it was never taken (the submission needed no worker)."""
        if not self.used:
            self.used = True
            self.slots.give_up(self.number)


def run_batch(
    submissions: list[Submission],
    prepared: Prepared,
    on_result: OnResult,
    *,
    jobs: int = 1,
    cache: ResultCache | None = None,
    forkserver: ForkServer | None = None,
    warm: tuple[str, ...] = (),
) -> BatchOutcome:
    """Grade ``submissions`` with at most ``jobs`` workers running at once. ``warm`` names more
    modules to import while the first worker runs (the reporter's).

    Observing (a worker runs the submission) and judging (checks and diagnosis, in this process)
    are pipelined: a thread that has collected its worker's results gives up its worker slot
    before it judges, so the next worker starts while this process judges. Judging holds the
    interpreter lock and workers are separate processes; together they keep every core busy,
    where one slot per submission from start to report would leave a core idle whenever the
    threads happen to be judging at the same time."""
    reports: dict[int, Report] = {}
    stopping = threading.Event()

    def record(index: int, report: Report, cached: bool = False) -> None:
        report = _labelled(report, submissions[index], cached)
        reports[index] = report
        on_result(index, report)

    todo: list[tuple[int, str | None]] = []
    try:
        for index, submission in enumerate(submissions):
            if submission.file is None:
                record(index, grade_one(submission, prepared, None)[0])
                continue
            key = None
            if cache is not None:
                try:
                    key = cache.key(submission.content_hash())
                except (OSError, TooLarge):  # unreadable now, or huge: graded, not cached
                    key = None
                hit = cache.get(key, prepared.suite.name) if key else None
                if hit is not None:
                    record(index, hit, cached=True)
                    continue
            todo.append((index, key))
    except KeyboardInterrupt:
        return BatchOutcome(reports, True, len(submissions))

    def finished(index: int, key: str | None, report: Report, cacheable: bool) -> None:
        if cache is not None and key is not None and cacheable:
            cache.put(key, report)
        record(index, report)

    if jobs <= 1 or len(todo) <= 1:
        # In this thread: no pool to start for one submission (the cold single-file case), and
        # Ctrl-C reaches run_submission, whose cleanup kills the worker. The first worker's run
        # is time enough to import what judging needs.
        warmer = JudgementWarmer(*warm)
        try:
            for index, key in todo:
                observed = _observe_one(submissions[index], prepared, forkserver, warmer.start)
                warmer.wait()
                finished(index, key, *(observed if isinstance(observed, tuple) else _judge_one(observed, prepared)))
        except KeyboardInterrupt:
            return BatchOutcome(reports, True, len(submissions))
        return BatchOutcome(reports, False, len(submissions))
    import concurrent.futures as futures  # here: a single submission does without

    slots = _Slots(jobs, stopping)

    def work(index: int, ticket: _Ticket) -> tuple[Report, bool]:
        try:
            if stopping.is_set():
                raise futures.CancelledError
            observed = _observe_one(submissions[index], prepared, forkserver, slot=ticket)
        finally:
            ticket.settle()
        return observed if isinstance(observed, tuple) else _judge_one(observed, prepared)

    # Twice as many threads as slots: while one thread judges, another holds its slot.
    pool = futures.ThreadPoolExecutor(max_workers=2 * jobs, thread_name_prefix="grade")
    pending = {pool.submit(work, index, slots.ticket(number)): (index, key) for number, (index, key) in enumerate(todo)}
    # A judging thread keeps the interpreter lock until the switch interval forces it to let go;
    # a thread whose worker just wrote (or wants its next request sent) waits that long each time.
    # A shorter interval keeps the workers fed; switching costs little next to what it saves.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, SWITCH_INTERVAL_S))
    try:
        # as_completed waits on every future once (a wait() per result would be quadratic), and
        # Ctrl-C interrupts its wait.
        for future in futures.as_completed(list(pending)):
            index, key = pending.pop(future)
            finished(index, key, *future.result())
    except KeyboardInterrupt:
        stopping.set()
        slots.stop()  # threads waiting for a slot give up
        for future in pending:
            future.cancel()
        if forkserver is not None:
            forkserver.close()  # kills every running worker's process group
        pool.shutdown(wait=True, cancel_futures=True)  # results that arrive now are dropped
        return BatchOutcome(reports, True, len(submissions))
    finally:
        sys.setswitchinterval(interval)
    pool.shutdown(wait=True)
    return BatchOutcome(reports, False, len(submissions))
