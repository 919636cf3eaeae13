"""What every worker process starts with, whichever way it is started (fresh or forked).

Import-light on purpose (no numpy): the fork server is started from here before the grader
imports anything heavy.
"""

from __future__ import annotations

import json
from pathlib import Path

# Stdlib only, like this module.
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
    # torch.compile runs the function as written (eagerly): its compiler needs a C++ toolchain
    # the sandbox never lets run, and what is graded is the function's arithmetic. Read by
    # torch._dynamo's config when a submission first compiles: costs nothing otherwise.
    "TORCH_COMPILE_DISABLE": "1",
    # Computed in the grader when it imports this module, after site processing.
    IMPORT_PATH_VAR: json.dumps(list(import_path())),
}

# The worker imports the very same `grader` package as this process (an installed copy and a source
# tree may both exist), with -I so that no environment variable or user site can change that.
PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)

# How a worker (runner.WORKER_BOOT) and the fork server (forkserver.SERVER_BOOT) begin, started as
# ``python -I -c BOOT PACKAGE_ROOT ...``, before anything of the grader is imported. Its own imports
# are of the standard library, found first on the interpreter's own path. Then sys.path becomes
# this process's import path, in this order (IMPORT_PATH_VAR), so every later import, the grader's
# own included, resolves to the file it resolves to here. The `grader` package itself is loaded
# from PACKAGE_ROOT alone (its submodules follow its __path__), without putting that folder on
# sys.path: first on the path it would put site-packages, the user site or a --target folder
# before the standard library (where a module named like one of it may lie), and it must not move.
IMPORT_BOOT = (
    "import json, os, sys; from importlib.machinery import PathFinder; from importlib.util import module_from_spec; "
    f"sys.path[:] = json.loads(os.environ[{IMPORT_PATH_VAR!r}]); "
    "spec = PathFinder.find_spec('grader', [sys.argv.pop(1)]); "
    "sys.modules['grader'] = package = module_from_spec(spec); spec.loader.exec_module(package); "
)
