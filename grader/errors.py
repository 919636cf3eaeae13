"""The grader's own errors and its exit codes.

A candidate's bug is never one of these: it is a failed check. These are for the grader's input
(paths, options, suites, references) and for the grader itself::

    GraderError                 every error the CLI turns into one line and an exit code
     +-- UsageError             a bad path or option                     -> exit 2
     +-- SuiteError             an invalid suite file                    -> exit 2
     +-- ReferenceDataError     missing or corrupt stored references     -> exit 2
     +-- OutputError            a report that cannot be written          -> exit 2
     +-- SandboxError           the worker could not be started at all   -> exit 3
     +-- SandboxUnavailable     --strict-sandbox, and a guarantee is missing here -> exit 2
     +-- GraderEnvironmentError the worker cannot import what the grader's Python can -> exit 2
                                (that submission is reported as not graded, the others go on)
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0  # every submission passed
    FAILED = 1  # at least one submission failed a check
    USAGE = 2  # bad path, option, suite, references or output location
    INTERNAL = 3  # a bug or environment failure in the grader itself
    INTERRUPTED = 130  # Ctrl-C: what was graded so far is kept


class GraderError(Exception):
    """Base of the grader's own errors; str() is the one line shown to the user."""

    exit_code: ExitCode = ExitCode.INTERNAL


class UsageError(GraderError):
    exit_code = ExitCode.USAGE


class SuiteError(GraderError):
    exit_code = ExitCode.USAGE


class ReferenceDataError(GraderError):
    exit_code = ExitCode.USAGE


class OutputError(GraderError):
    exit_code = ExitCode.USAGE


class SandboxError(GraderError):
    exit_code = ExitCode.INTERNAL


class SandboxUnavailable(GraderError):
    """Strict mode, and this machine cannot give the worker every isolation guarantee: nothing is
    graded (the environment is the problem, as with a bad option)."""

    exit_code = ExitCode.USAGE


class GraderEnvironmentError(GraderError):
    """The sandboxed worker cannot import a module that the grader's own Python imports (a
    framework, SciPy, ... installed outside the folders the worker may read, or unreadable for
    it): the grader's installation is at fault, not the candidate. The submission is reported as
    not graded, nothing of it is cached, and the run exits 2."""

    exit_code = ExitCode.USAGE
