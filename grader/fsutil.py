"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, data: bytes, durable: bool = True) -> None:
    """Write through a temporary file in the same folder and rename: never a half-written file.

    ``durable`` also flushes the data to disk before the rename (reports, references). A cache
    entry skips that: after a power loss it may be empty, and the cache ignores invalid entries.
    Raises OSError (the temporary file is removed first).
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
