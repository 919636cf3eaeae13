"""Worker slots: at most ``jobs`` workers at once in a parallel run (see grader.pipeline)."""

from __future__ import annotations

import os
import threading

from grader.errors import SandboxError


def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class Slots:
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

    def ticket(self, number: int) -> Ticket:
        return Ticket(self, number)

    def _advance(self) -> None:
        while self.turn in self.given_up:
            self.given_up.discard(self.turn)
            self.turn += 1

    def acquire(self, number: int) -> None:
        """Raises SandboxError once grading is stopping."""
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
        """Wake every submission waiting for a slot (``stopping`` is set): they give up."""
        with self.changed:
            self.changed.notify_all()


class Ticket:
    """One submission's claim on a slot: the context manager run_submission holds while its
    worker lives."""

    def __init__(self, slots: Slots, number: int) -> None:
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
