"""The result cache: a second run over the same folder reuses the results it already has.

An entry is the JSON report of one submission (``report_dict``), stored under a key that covers
everything the verdict depends on:

* the submission's content (the graded file, and for a checkout every Python file in it, with
  their relative paths: see ``Submission.content_hash``);
* the suite (``Suite.fingerprint()``: cases, checks, tolerances, severities), the function name
  and the limits;
* the grader itself: its version and a digest of its own source files, so that a changed grader
  never serves verdicts of the old one;
* the environment the worker runs in: the Python version and the installed versions of numpy
  and of each framework the worker may import (``environment``), so that an upgrade, or a fixed
  installation, never replays verdicts observed under the old one.

Entries live in ``$XDG_CACHE_HOME/attention-grader`` (``~/.cache/attention-grader`` by default),
or in ``--cache-dir`` / ``$GRADER_CACHE_DIR``; never inside the folder being graded, where a
candidate could plant one. Entries are written atomically; an entry that does not parse, names
another key or does not validate as a report is ignored (and replaced), never trusted.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
from pathlib import Path
from typing import Any

from grader import __version__
from grader.fsutil import write_atomically
from grader.prepare import Prepared
from grader.report.jsonfmt import report_dict, report_from_dict
from grader.report.model import Report

FORMAT = 1


class NoCacheFolder(Exception):
    """No folder to keep results in: no --cache-dir, no XDG_CACHE_HOME, and no home folder (HOME
    unset and a user id without a passwd entry, as in a container run with --user)."""


def default_cache_dir() -> Path:
    """Raises NoCacheFolder."""
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # Path.home(): "Could not determine home directory."
            raise NoCacheFolder("results are not cached: no home folder (HOME is unset); set XDG_CACHE_HOME or use --cache-dir") from None
    return Path(base) / "attention-grader"


def grader_digest() -> str:
    """The version and a digest of every source file of the running grader."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256(__version__.encode())
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


# The distributions the worker imports besides the standard library: numpy always, torch or JAX
# (with its jaxlib) for a framework submission.
WORKER_DISTRIBUTIONS = ("numpy", "torch", "jax", "jaxlib")


def environment() -> dict[str, str | None]:
    """The Python the worker runs on and the versions of what it imports (None: not installed)."""
    found: dict[str, str | None] = {"python": f"{platform.python_implementation()} {platform.python_version()}"}
    for name in WORKER_DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


class ResultCache:
    """Reads and writes entries; a problem with the cache folder only turns the cache off."""

    def __init__(self, directory: Path, context: dict[str, Any]) -> None:
        self.directory = directory
        keyed = {**context, "grader": grader_digest(), "environment": environment()}
        self.context = hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()
        self.problem: str | None = None  # set when the cache could not be written
        self.hits = 0

    @classmethod
    def for_run(cls, prepared: Prepared, directory: Path | None = None) -> ResultCache:
        """The cache for grading with ``prepared`` (its suite, function and limits key entries).
        Raises NoCacheFolder when no ``directory`` is given and there is no default one."""
        limits = prepared.limits
        context = {
            "suite": prepared.suite.fingerprint(),
            "function": prepared.function,
            "limits": [limits.timeout_s, limits.memory_mb, limits.output_bytes, limits.result_bytes, limits.file_bytes],
        }
        return cls(directory or default_cache_dir(), context)

    def key(self, content_hash: str) -> str:
        return hashlib.sha256(f"{self.context}:{content_hash}".encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str, suite_name: str) -> Report | None:
        try:
            path = self._path(key)
            if not path.exists():
                return None
            entry = json.loads(path.read_bytes())
            if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != key:
                return None
            report = report_from_dict(entry.get("report"), suite_name)
        except (OSError, ValueError, RecursionError):
            return None
        self.hits += 1
        return report

    def put(self, key: str, report: Report) -> None:
        if self.problem is not None:
            return
        data = {"format": FORMAT, "key": key, "report": report_dict(report)}
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, json.dumps(data, allow_nan=False).encode(), durable=False)
        except (OSError, ValueError) as exc:
            self.problem = f"{self.directory}: results are not cached: {getattr(exc, 'strerror', None) or exc}"
