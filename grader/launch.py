"""The first moments of the `grade` command: start the fork server before anything else.

The fork server is a fresh interpreter that imports numpy, the slowest part of a cold start. The
earlier it starts, the more of that import runs while this process imports click and the rest of
the grader, so a cold `grade sub.py` waits less for its one worker. Only this module and
``grader.sandbox.forkserver`` (standard library only) are imported before the server starts.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grader.sandbox.forkserver import ForkServer

# Arguments after which nothing is graded (help, version, explanations, the sandbox report, the
# subcommands): no server for them. A wrong guess costs nothing: an unused server is killed at
# the end, and a grading run without one starts its own.
_NO_GRADING = ("-h", "--help", "--version", "--explain", "--sandbox-info")
_SUBCOMMANDS = ("explain", "references", "suite")


def will_grade(args: list[str]) -> bool:
    if not args or args[0] in _SUBCOMMANDS:
        return False
    return not any(arg in _NO_GRADING or arg.startswith("--explain=") for arg in args)


def main() -> None:
    """The console script (and `python -m grader`)."""
    # numpy's BLAS starts a thread per core when it is imported, and those threads spin for a
    # while: a second core spent for nothing, while the fork server and the workers need it. The
    # grader's own matrices are tiny. An explicit setting of the user's is kept.
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")
    # A cold start allocates a few hundred thousand objects while it imports (modules, classes,
    # numpy's tables) and frees almost none: the cyclic collector, run every few hundred
    # allocations, only costs time then (about a tenth of a cold grade). The CLI turns it back
    # on before grading more than one submission (grader.cli.collect_garbage_again).
    gc.disable()
    early: ForkServer | None = None
    try:
        if will_grade(sys.argv[1:]):
            from grader.sandbox.forkserver import ForkServer

            early = ForkServer.start()
        from grader import cli
    except KeyboardInterrupt:
        if early is not None:
            early.close()
        print("grade: error: interrupted", file=sys.stderr)
        sys.exit(130)
    cli.main(early)
