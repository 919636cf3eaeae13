"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once, at import: os.umask can only be read by setting it, which must not happen while
# batch threads create files.
UMASK = _umask()


def write_atomically(path: Path, data: bytes, durable: bool = True) -> None:
    """Write through a temporary file in the same folder and rename: never a half-written file.

    ``durable`` also flushes the data to disk before the rename (reports, references). A cache
    entry skips that: after a power loss it may be empty, and the cache ignores invalid entries.
    Raises OSError (the temporary file is removed first).
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file private (0600); the finished file gets the mode any new file
        # would (0644 under the usual umask), so a report or a reference stays readable by others.
        os.fchmod(fd, 0o666 & ~UMASK)
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
