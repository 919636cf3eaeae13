"""Writing files so that a reader never sees half of one, and output files where the user
pointed: through a link onto its target, through a device or a FIFO by writing to it; and
reading a candidate's file, which may be anything but a regular file."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from dataclasses import dataclass
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


# How many symbolic links one output path may go through, as the kernel's own limit (ELOOP).
MAX_LINKS = 40


@dataclass(frozen=True)
class Target:
    """Where a write to an output path lands. ``file`` is the path with every symbolic link
    resolved: a link to a regular file is never replaced, its target is. ``through`` is a target
    that exists and is not a regular file (a character device such as /dev/null, a FIFO, or a
    descriptor such as /dev/stdout): it is opened for writing and written through, never renamed
    onto (no atomicity is possible there, and a rename would destroy the device or the link)."""

    file: Path
    through: bool = False
    descriptor: bool = False  # /dev/stdout, /dev/fd/N, /proc/<pid>/fd/N: an open file of a process


def _descriptor_folder(folder: Path) -> bool:
    # /proc/<pid>/fd or /proc/<pid>/task/<tid>/fd, which /dev/fd and /proc/self/fd resolve to.
    return folder.parts[1:2] == ("proc",) and folder.name == "fd"


def output_target(path: Path) -> Target:
    """Resolve ``path`` link by link. A link into a descriptor folder stops there: resolved
    further, /dev/stdout of a shell's ``> out.txt`` would be out.txt itself, renamed onto while the
    shell's descriptor still writes to the old file. Raises OSError (a link loop)."""
    current = Path(os.path.join(os.getcwd(), path))
    for _ in range(MAX_LINKS):
        if current.name == "..":
            current = Path(os.path.realpath(current))
        folder = Path(os.path.realpath(current.parent))
        current = folder / current.name
        if _descriptor_folder(folder):
            return Target(current, through=True, descriptor=True)
        if not current.is_symlink():
            break
        current = folder / os.readlink(current)  # an absolute link target replaces the folder
    else:
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))
    try:
        mode = os.stat(current).st_mode
    except OSError:  # not there yet (or not reachable: check_writable says why)
        return Target(current)
    return Target(current, through=not stat.S_ISREG(mode) and not stat.S_ISDIR(mode))


def open_through(target: Target) -> int:
    """A descriptor to write ``target`` through (see Target), appending. An open file of this
    process is shared (os.dup), not opened again: reopened, a regular file behind /dev/stdout
    would be written from its start, over what stdout already wrote there, or lost when a later
    flush of stdout wrote over it. Raises OSError."""
    parts = target.file.parts
    if target.descriptor and parts[2] == str(os.getpid()) and parts[-1].isdigit():
        return os.dup(int(parts[-1]))
    # No O_CREAT: a target that is gone is an error, never a new regular file made in its place.
    # O_NONBLOCK for the open only: a FIFO that no process reads would block the open for good;
    # so it fails at once (ENXIO), and once open the writes wait for the reader as usual.
    fd = os.open(target.file, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
    os.set_blocking(fd, True)
    return fd


def check_replaceable(file: Path) -> None:
    """Raises OSError unless ``file`` is missing or a regular file: the last look before a
    rename onto it, so nothing else that appeared there meanwhile is ever replaced."""
    try:
        mode = os.lstat(file).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise OSError(errno.EEXIST, "is no longer a regular file; not replaced", str(file))


def write_output(path: Path, data: bytes) -> None:
    """Write an output file the user named: through, when it is a device, a FIFO or a
    descriptor; else atomically, onto the file a link leads to (the link stays a link). Raises
    OSError."""
    target = output_target(path)
    if target.through:
        with os.fdopen(open_through(target), "wb") as handle:
            handle.write(data)
        return
    check_replaceable(target.file)
    write_atomically(target.file, data)


def read_regular(path: Path, limit: int | None = None, follow: bool = True) -> bytes:
    """The bytes of a regular file, at most ``limit`` + 1 of them (so a caller can tell a file
    over its limit). A candidate's folder may hold a FIFO or a device under any name, or a link
    to one: opened without O_NONBLOCK a FIFO blocks the grader forever, and /dev/zero never
    ends, so anything but a regular file is refused after the open, never read. ``follow``
    False refuses a link too. Raises OSError."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file; not read", str(path))
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read() if limit is None else handle.read(limit + 1)
    finally:
        os.close(fd)
