"""What every worker process starts with, whichever way it is started (fresh or forked).

Import-light on purpose (no numpy): the fork server is started from here before the grader
imports anything heavy.
"""

from __future__ import annotations

import json
from pathlib import Path

# Stdlib only, like this module; importing it puts the grader's import folders on sys.path in the
# fork server (see paths.adopt_import_path).
from grader.sandbox.isolation.paths import IMPORT_PATH_VAR, import_path

# Only what Python and numpy need. Nothing of the caller's environment (tokens, keys, CI secrets)
# is passed on.
BASE_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "PYTHONIOENCODING": "utf-8",
    # One thread each: the worker must stay single-threaded for the isolation layers (Landlock and
    # user namespaces apply to a single-threaded process), and parallel workers share the cores.
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    # glibc gives every thread that allocates its own malloc arena, reserving 64 MiB of address
    # space each: a framework with a thread pool (JAX starts about 17 threads) would exhaust the
    # address-space limit on reservations alone.
    "MALLOC_ARENA_MAX": "2",
    # Computed in the grader when it imports this module, after site processing.
    IMPORT_PATH_VAR: json.dumps(list(import_path())),
}

# The worker imports the very same `grader` package as this process (an installed copy and a source
# tree may both exist), with -I so that no environment variable or user site can change that.
PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)
