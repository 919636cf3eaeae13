"""Anonymous temporary files for reporters that must hold what they wrote until the end (the
JUnit suites, written after the totals; annotations held back while GitHub's runner ignores
workflow commands): written to disk, not kept in memory."""

from __future__ import annotations

import os
import tempfile
from typing import IO


def spool(beside: IO[str] | None = None) -> IO[str]:
    """An anonymous temporary text file (never seen in any folder; gone when closed) for a
    reporter that must hold what it wrote until the end: beside ``beside`` when that is a file
    on disk (a report file's own disk), else in the system's temporary folder."""
    name = getattr(beside, "name", None)
    folder = os.path.dirname(name) if isinstance(name, str) and os.path.isfile(name) else None
    return tempfile.TemporaryFile("w+", encoding="utf-8", errors="backslashreplace", newline="", dir=folder or None)
