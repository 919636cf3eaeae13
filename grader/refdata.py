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
import math
import shlex
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path

import numpy as np

from grader.attention import exact_attention
from grader.errors import ReferenceDataError
from grader.fsutil import write_atomically
from grader.masks import case_mask
from grader.suite import Case, Shape, Suite, load_suite

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
    expected_files, stored_cases = _read_manifest(manifest_path, hint)
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
            arrays[label] = _read_array(path, data, _DIMS[label](case.shape), name, hint)
        cases[name] = CaseData(case=case, **arrays)
    return ReferenceSet(directory=directory, cases=cases)


def _read_manifest(path: Path, hint: str) -> tuple[dict[str, str], dict[str, str]]:
    """The manifest's checksums by file name and case digests by case name. Raises
    ReferenceDataError saying in words what is wrong with it."""
    unreadable = f"{path}: unreadable reference manifest"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReferenceDataError(f"{path}: reference manifest missing; {hint}") from None
    except UnicodeDecodeError as exc:
        raise ReferenceDataError(f"{unreadable}: not UTF-8 text (byte {exc.start}); {hint}") from None
    except OSError as exc:
        raise ReferenceDataError(f"{unreadable}: {exc.strerror}; {hint}") from None
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReferenceDataError(f"{unreadable}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); {hint}") from None
    except (ValueError, RecursionError):  # a number of too many digits, nesting too deep
        raise ReferenceDataError(f"{unreadable}: not JSON (nested too deeply, or a number of too many digits); {hint}") from None
    if not isinstance(manifest, dict):
        raise ReferenceDataError(f"{unreadable}: not a JSON object but {_json_kind(manifest)}; {hint}")
    fields: list[dict[str, str]] = []
    for field, what in (("files", "file names to SHA-256 checksums"), ("cases", "case names to digests")):
        if field not in manifest:
            raise ReferenceDataError(f"{unreadable}: the field '{field}' is missing; {hint}")
        value = manifest[field]
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ReferenceDataError(f"{unreadable}: the field '{field}' is not an object of {what}; {hint}")
        fields.append(value)
    return fields[0], fields[1]


def _json_kind(value: object) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number", bool: "true or false", type(None): "null"}.get(type(value), type(value).__name__)


# The shape each stored array of a case has.
_DIMS = {"Q": Shape.q, "K": Shape.k, "V": Shape.v, "weights": Shape.weights, "output": Shape.output}


def _read_array(path: Path, data: bytes, dims: tuple[int, ...], case: str, hint: str) -> np.ndarray:
    """A reference file's float64 array of shape ``dims``, read from the .npy format's header and
    data alone: nothing is ever unpickled (np.load would fall back to pickle for anything that is
    not .npy, and advise loading it unsafely), and nothing is allocated before the header is
    known to describe float64 numbers of the case's shape. Raises ReferenceDataError."""
    not_npy = f"{path}: not a .npy array of numbers"
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
    except ValueError:
        raise ReferenceDataError(f"{not_npy}: it does not begin as a .npy file does (the grader never loads pickled data); {hint}") from None
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    try:
        shape, fortran_order, dtype = readers[version](stream)
    # numpy reads the header with ast.literal_eval: a shape of 3,000 nested minus signs exhausts
    # the parser's recursion, one of huge numbers its memory; each is a corrupt header too.
    except (KeyError, ValueError, TypeError, SyntaxError, RecursionError, MemoryError, OverflowError):
        raise ReferenceDataError(f"{not_npy}: its .npy header is unreadable; {hint}") from None
    if dtype.hasobject:
        raise ReferenceDataError(f"{not_npy}: it holds Python objects, which the grader never unpickles; {hint}")
    if dtype != np.float64:
        raise ReferenceDataError(f"{not_npy}: it holds {dtype} values, not float64; {hint}")
    if shape != dims:
        raise ReferenceDataError(f"{path}: shape {shape} does not match case '{case}' {dims}; {hint}")
    size = math.prod(shape) * dtype.itemsize
    if len(data) - stream.tell() != size:
        raise ReferenceDataError(f"{not_npy}: {len(data) - stream.tell()} bytes of data, expected {size} for shape {shape}; {hint}")
    array = np.frombuffer(data, dtype=np.float64, offset=stream.tell()).reshape(shape, order="F" if fortran_order else "C")
    return array.copy()  # writable and owning its memory, as np.load's arrays are
