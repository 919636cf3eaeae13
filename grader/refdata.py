"""Stored reference data: where it is, checking it, and writing it again.

``reference/`` holds, for every case of the suite, the inputs Q, K, V and the expected weights and
outputs as ``.npy`` files, plus ``manifest.json`` with the SHA-256 of each file and a digest of the
cases they were made from. The grader refuses to grade with a file missing, altered, or made for
other cases: a silently wrong reference would fail correct submissions.

The default references and the default suite ship inside the package as ``grader.reference`` and
``grader.fixtures`` (the folders ``grader/reference`` and ``grader/fixtures``), and are found with
``importlib.resources``: from a checkout, an editable install or a plain one alike.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import io
import json
import shlex
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path

import numpy as np

from grader.attention import exact_attention
from grader.errors import ReferenceDataError
from grader.fsutil import write_atomically
from grader.masks import case_mask
from grader.suite import Case, Suite, load_suite

REFERENCE_PACKAGE = "grader.reference"
SUITE_PACKAGE = "grader.fixtures"
SUITE_FILE = "suite.yaml"
MANIFEST = "manifest.json"
ARRAYS = ("Q", "K", "V", "weights", "output")
# Inputs are rounded to this grid so that every product and every sum of up to 2**20 products is
# exact in float64: the stored expectations then do not depend on how a BLAS orders its sums.
GRID = 256.0


# The grader needs the data as paths for as long as it runs: the sandbox hides them from every
# worker, and `grade references --regenerate` writes the default folder. as_file gives the folder
# itself for a package installed as files (the only way it is installed, editable or not); were
# it ever imported from a zip (folders need Python 3.12 there), the copy as_file extracts is
# removed when the grader exits.
_AS_FILES = contextlib.ExitStack()
atexit.register(_AS_FILES.close)


@functools.cache
def _package_path(package: str, name: str = "") -> Path:
    """The path of ``name`` in a data package (the package's folder for ``""``). Raises
    ReferenceDataError when the package is not installed."""
    try:
        resource = files(package)
    except ModuleNotFoundError:
        raise ReferenceDataError(f"{package}: the grader's data package is not installed; reinstall attention-grader") from None
    return _AS_FILES.enter_context(as_file(resource / name if name else resource))


def default_suite_path() -> Path:
    return _package_path(SUITE_PACKAGE, SUITE_FILE)


def default_reference_dir() -> Path:
    return _package_path(REFERENCE_PACKAGE)


def load_default_suite() -> Suite:
    return load_suite(default_suite_path())


def reference_dir_for(suite: Suite) -> Path:
    return suite.references if suite.references is not None else default_reference_dir()


@dataclass(frozen=True)
class CaseData:
    """A stored case's inputs and its reference weights and output."""

    case: Case
    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    weights: np.ndarray
    output: np.ndarray


@dataclass(frozen=True)
class ReferenceSet:
    """The verified references of a suite, by case."""

    directory: Path
    cases: dict[str, CaseData]


def make_inputs(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(case.seed)
    shape = case.shape
    arrays = []
    for dims in (shape.q(), shape.k(), shape.v()):
        arrays.append(np.round(rng.standard_normal(dims) * (case.magnitude * GRID)) / GRID)
    return arrays[0], arrays[1], arrays[2]


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array, dtype="<f8"), allow_pickle=False)
    return buffer.getvalue()


def build_files(suite: Suite) -> dict[str, bytes]:
    """Every file of the reference folder, as bytes, computed from the suite alone."""
    files: dict[str, bytes] = {}
    for name, case in sorted(suite.cases.items()):
        Q, K, V = make_inputs(case)
        weights, output = exact_attention(Q, K, V, case_mask(case))  # Masked cases
        for label, array in zip(ARRAYS, (Q, K, V, weights, output)):
            files[f"{name}.{label}.npy"] = _npy_bytes(array)
    manifest = {
        "suite": suite.name,
        "cases": suite.case_digests(),
        "files": {n: hashlib.sha256(b).hexdigest() for n, b in sorted(files.items())},
    }
    files[MANIFEST] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    return files


def regenerate(suite: Suite, directory: Path) -> list[Path]:
    """Write the reference folder for ``suite`` (deterministic: same bytes on every run). The
    grader's own folder is written for the built-in suite alone: a suite of one's own without a
    ``references:`` folder may read the cases it shares with the built-in one from there, but
    regenerating would replace them (and remove every other case's files)."""
    if _same_file(directory, default_reference_dir()) and not _is_default_suite(suite):
        raise ReferenceDataError(
            f"{directory}: the grader's own references, not suite '{suite.name}''s: name a folder of its own "
            f"with `references: FOLDER` in {suite.source or 'the suite'} or with --out FOLDER"
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
        written = []
        files = build_files(suite)
        keep = set(files)
        for stale in directory.glob("*.npy"):
            if stale.name not in keep:
                stale.unlink()
        for name, data in files.items():
            write_atomically(directory / name, data)
            written.append(directory / name)
    except OSError as exc:
        raise ReferenceDataError(f"{directory}: cannot write references: {exc.strerror}") from None
    return written


def regenerate_command(suite: Suite, directory: Path | None = None) -> str:
    """The exact command that writes ``suite``'s references (into ``directory`` when that is not
    the suite's own folder): a suite of one's own is named with --suite, as it was given, quoted
    for a shell where it needs to be."""
    command = "grade references --regenerate"
    if not _is_default_suite(suite):
        assert suite.source is not None
        command += f" --suite {shlex.quote(str(suite.source))}"
        if directory is None and suite.references is None:
            # Never into the grader's own folder (see regenerate): a folder beside the suite.
            directory = suite.source.with_name(f"{suite.source.stem}.reference")
    if directory is not None and not _same_file(directory, reference_dir_for(suite)):
        command += f" --out {shlex.quote(str(directory))}"
    return command


def _is_default_suite(suite: Suite) -> bool:
    return suite.source is None or _same_file(suite.source, default_suite_path())


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):  # a loop of links: not the packaged suite
        return False


def load_references(suite: Suite, directory: Path | None = None) -> ReferenceSet:
    """Load and verify the stored references. Raises ReferenceDataError with one line."""
    hint = f"regenerate them with: {regenerate_command(suite, directory)}"
    if directory is None and suite.references is None and not _is_default_suite(suite) and suite.source is not None:
        hint += f", then add `references: {suite.source.stem}.reference` to {suite.source}"
    directory = directory or reference_dir_for(suite)
    manifest_path = directory / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        expected_files = dict(manifest["files"])
        stored_cases = dict(manifest["cases"])
    except FileNotFoundError:
        raise ReferenceDataError(f"{manifest_path}: reference manifest missing; {hint}") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReferenceDataError(f"{manifest_path}: unreadable reference manifest ({type(exc).__name__}); {hint}") from None
    for name, digest in suite.case_digests().items():
        # A suite may use any subset of a folder's cases, each exactly as it was generated.
        if stored_cases.get(name) != digest:
            why = "has no case" if name not in stored_cases else "was made for another definition of case"
            raise ReferenceDataError(f"{manifest_path}: references were made for other cases than suite '{suite.name}' (it {why} '{name}'); {hint}")
    cases: dict[str, CaseData] = {}
    for name, case in suite.cases.items():
        arrays: dict[str, np.ndarray] = {}
        for label in ARRAYS:
            file_name = f"{name}.{label}.npy"
            path = directory / file_name
            if file_name not in expected_files:
                raise ReferenceDataError(f"{manifest_path}: no entry for {file_name}; {hint}")
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                raise ReferenceDataError(f"{path}: reference file missing; {hint}") from None
            except OSError as exc:
                raise ReferenceDataError(f"{path}: cannot read reference file: {exc.strerror}") from None
            if hashlib.sha256(data).hexdigest() != expected_files[file_name]:
                raise ReferenceDataError(f"{path}: checksum mismatch, the reference file is corrupt or was edited; {hint}")
            try:
                arrays[label] = np.load(io.BytesIO(data), allow_pickle=False)
            except ValueError as exc:
                raise ReferenceDataError(f"{path}: not a valid .npy array ({exc})") from None
        shape = case.shape
        wanted = {"Q": shape.q(), "K": shape.k(), "V": shape.v(), "weights": shape.weights(), "output": shape.output()}
        for label, dims in wanted.items():
            if arrays[label].shape != dims or arrays[label].dtype != np.float64:
                raise ReferenceDataError(f"{directory / f'{name}.{label}.npy'}: shape {arrays[label].shape} does not match case '{name}' {dims}")
        cases[name] = CaseData(case=case, **arrays)
    return ReferenceSet(directory=directory, cases=cases)
