"""The outputs of a run checked against each other and against its inputs, before grading.

An output written onto one of the run's inputs would destroy it: a submission (``-o json=sub.py
sub.py``, or a file found in a graded folder or a checkout), the suite, its references folder (no
output inside it), the roster, a report to merge. Two outputs naming one file would let one
silently win. Either is one line and exit 2 (UsageError), before anything is graded.

Paths are compared resolved: every symbolic link followed (an output through a link is the file
it leads to, grader.fsutil.output_target), and by device and inode where the output exists with
more than one name (hard links). Outputs written through (/dev/null, a FIFO, /dev/stdout) may be
named twice: each is written to in turn, none replaces the other.

No output goes through a symbolic link inside a candidate's folder (a checkout, or the folder of
a file graded by name). The candidate commits those links: in CI the job's working folder is
their repository, so `grader-junit.xml -> .git/config` (or to any file the job may write, inside
the folder or out of it) would have the grader replace that file with the report.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from grader.discover import Submission
from grader.errors import UsageError
from grader.fsutil import Target, output_target
from grader.report.files import OutputSpec

Named = tuple[Path, str]  # a path, and what a message calls it ("the roster ros.csv")


@dataclass(frozen=True)
class _Output:
    name: str  # "-o json=x.json", "--feedback DIR"
    target: Target
    inode: tuple[int, int] | None  # (device, inode) of an existing file with other names
    folder: bool = False  # --feedback: a folder of files, never one of the inputs itself


def _output(name: str, path: Path, folder: bool = False) -> _Output:
    try:
        target = output_target(path)
    except OSError:  # a link loop: check_writable (or the feedback folder) says so
        return _Output(name, Target(Path(os.path.abspath(path))), None, folder)
    try:
        status = os.stat(target.file)
    except OSError:  # not there yet
        return _Output(name, target, None, folder)
    return _Output(name, target, (status.st_dev, status.st_ino) if status.st_nlink > 1 and not folder else None, folder)


class _Resolved:
    """Input paths resolved, each folder once: a batch's checkouts hold thousands of files, most
    in a few folders."""

    def __init__(self) -> None:
        self.folders: dict[str, str] = {}

    def __call__(self, path: Path) -> str:
        folder, name = os.path.split(os.path.join(os.getcwd(), path))
        if name in ("", ".", ".."):
            return os.path.realpath(path)
        real = self.folders.get(folder)
        if real is None:
            real = self.folders[folder] = os.path.realpath(folder)
        full = os.path.join(real, name)
        return os.path.realpath(full) if os.path.islink(full) else full


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_outputs(
    specs: Sequence[OutputSpec],
    inputs: Iterable[Named] = (),
    folders: Iterable[Named] = (),
    feedback: Path | None = None,
    *,
    twice: bool = True,
    candidates: Iterable[Path] = (),
) -> None:
    """Raises UsageError for an output that is one of ``inputs`` or lies in one of ``folders``
    (the feedback folder too), with ``twice`` for two outputs that are one file (an -o file and
    the feedback folder included), and for an output whose way runs through a symbolic link
    inside one of ``candidates`` (the candidates' folders)."""
    named_paths = [(f"-o {spec.fmt}={spec.path}", spec.path) for spec in specs]
    if feedback is not None:
        named_paths.append((f"--feedback {feedback}", feedback))
    _refuse_candidate_links(named_paths, candidates)
    outputs = [_output(name, path, folder=path is feedback) for name, path in named_paths]
    if twice:
        _refuse_twice(outputs)
    for path, what in folders:
        real = os.path.realpath(path)
        for output in outputs:
            if _inside(str(output.target.file), real):
                raise UsageError(f"{output.name} is inside {what}; choose another path for the output")
    files = {str(o.target.file): o for o in outputs if not o.folder}
    inodes = {o.inode: o for o in outputs if o.inode is not None}
    resolved = _Resolved()
    for path, what in inputs:
        clash = files.get(resolved(path))
        if clash is None and inodes:
            try:
                status = os.stat(path)
                clash = inodes.get((status.st_dev, status.st_ino))
            except OSError:
                pass
        if clash is not None:
            raise UsageError(f"{clash.name} would overwrite {what}; choose another path for the output")


def _refuse_candidate_links(outputs: list[tuple[str, Path]], candidates: Iterable[Path]) -> None:
    folders = {os.path.realpath(folder) for folder in candidates}
    if not folders:
        return
    for name, path in outputs:
        parts = Path(os.path.join(os.getcwd(), path)).parts
        for depth in range(2, len(parts) + 1):
            step = Path(*parts[:depth])
            if step.name not in ("", ".", "..") and step.is_symlink():
                parent = os.path.realpath(step.parent)
                owner = next((f for f in sorted(folders) if _inside(parent, f)), None)
                if owner is not None:
                    raise UsageError(f"{name}: {step} is a symbolic link inside {owner}, a candidate's folder; an output is never written through a candidate's link: remove it, or choose another path")


def _refuse_twice(outputs: list[_Output]) -> None:
    seen: dict[object, _Output] = {}
    for output in outputs:
        if output.target.through:  # each is written to in turn: none is lost
            continue
        for key in (str(output.target.file), output.inode):
            if key is None:
                continue
            first = seen.setdefault(key, output)
            if first is not output:
                raise UsageError(f"{first.name} and {output.name} are the same file; give each output its own path")


def named(path: Path | None, what: str) -> list[Named]:
    """``path`` as an input called ``what`` and the path (none when not given)."""
    return [] if path is None else [(path, f"{what} {path}")]


def candidate_folders(found: Sequence[Submission]) -> set[Path]:
    """The folders the candidates control: each checkout, and the folder of each file graded by
    name (a loose file of a batch folder is the candidate's, its folder is not)."""
    folders: set[Path] = set()
    for submission in found:
        if submission.folder is not None:
            folders.add(submission.folder)
        elif submission.file is not None and not submission.loose:
            folders.add(submission.file.parent)
    return folders


def submission_files(found: Sequence[Submission]) -> Iterator[Named]:
    """The files of the submissions found that the run reads: each graded file, and every
    Python file of each checkout."""
    for submission in found:
        if submission.file is not None:
            yield submission.file, f"the submission {submission.file}"
        for file in submission.related:
            if file != submission.file:
                yield file, f"{file}, a file of the checkout {submission.label}"
