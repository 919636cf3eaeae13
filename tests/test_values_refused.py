"""Values a user gives that make no sense are refused before anything is graded: one line on
stderr naming the option (or the suite's file:line and key path), exit 2, never a worker started
and never a candidate's verdict. Each case both ways: the value refused, a sensible one accepted.

The limits go through the `grade` process itself (the path an option takes to the worker is what
once failed: a timeout of 1e308 became a CPU limit of 309 digits); suites through parse_suite.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import EXAMPLES
from grader import Options, grade
from grader.cli import cli
from grader.errors import ReferenceDataError, SuiteError, UsageError
from grader.refdata import build_files, default_suite_path, load_default_suite, load_references
from grader.suite import parse_suite

SUITE = default_suite_path().read_text(encoding="utf-8")
CORRECT = EXAMPLES / "correct.py"


def run_grade(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grader", "--cache-dir", str(cache), *args], capture_output=True, text=True, timeout=180,
    )


def assert_refused(done: subprocess.CompletedProcess[str], fragment: str) -> None:
    """One line on stderr, exit 2, nothing on stdout: no submission was graded."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    assert done.stderr.startswith("grade: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert fragment in done.stderr, done.stderr


def suite_with(old: str, new: str) -> str:
    assert SUITE.count(old) == 1, old
    return SUITE.replace(old, new)


def suite_error(text: str) -> str:
    with pytest.raises(SuiteError) as info:
        parse_suite(text, "s.yaml")
    return str(info.value)


def line_of(old: str) -> int:
    return SUITE[: SUITE.index(old)].count("\n") + 1


# --------------------------------------------------------------------------------------------
# 1. Limits: finite, and within their documented bounds


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--timeout", "nan"], "Invalid value for '--timeout': must be a finite number of seconds, got nan"),
        (["--timeout", "inf"], "Invalid value for '--timeout': inf is not in the range 0.1<=x<=3600"),
        (["--timeout", "1e308"], "Invalid value for '--timeout': 1e+308 is not in the range 0.1<=x<=3600"),
        (["--timeout", "3600.5"], "Invalid value for '--timeout'"),
        (["--memory", "1048577"], "Invalid value for '--memory': 1048577 is not in the range 64<=x<=1048576"),
    ],
    ids=["timeout-nan", "timeout-inf", "timeout-1e308", "timeout-over-an-hour", "memory-over-1TB"],
)
def test_a_limit_out_of_bounds_is_refused_before_any_worker(args: list[str], fragment: str, tmp_path: Path) -> None:
    done = run_grade(*args, str(CORRECT), cache=tmp_path / "cache")
    assert_refused(done, fragment)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert not (tmp_path / "cache").exists()  # nothing graded, nothing cached


def test_the_largest_limits_are_accepted_and_grade(tmp_path: Path) -> None:
    done = run_grade("--timeout", "3600", "--memory", "1048576", "-q", str(CORRECT), cache=tmp_path / "cache")
    assert done.returncode == 0, (done.stdout, done.stderr)  # 0: every submission passed


def test_the_help_gives_the_bounds() -> None:
    result = CliRunner().invoke(cli, ["check", "--help"], terminal_width=200)
    text = " ".join(result.stdout.split())
    assert "0.1<=x<=3600" in text and "at most 3600 s" in text
    assert "64<=x<=1048576" in text and "1 TB" in text


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("timeout: 10 ", "timeout: .nan ", "limits.timeout: expected a finite number, got nan"),
        ("timeout: 10 ", "timeout: .inf ", "limits.timeout: expected a finite number, got inf"),
        ("timeout: 10 ", "timeout: 1.0e+308 ", "limits.timeout: must be at most 3600 s, got 1e+308"),
        ("timeout: 10 ", "timeout: 0.05 ", "limits.timeout: must be at least 0.1 s, got 0.05"),
        ("memory_mb: 1024", "memory_mb: 1048577", "limits.memory_mb: must be at most 1048576 MB, got 1048577"),
        ("memory_mb: 1024", "memory_mb: " + "9" * 400, "limits.memory_mb: must be at most 1048576 MB, got a whole number of more than 15 digits"),
        ("memory_mb: 1024", "memory_mb: " + "9" * 5000, "limits.memory_mb: not a value YAML can build: a whole number of more than 4300 digits or an impossible date (quote text)"),
        ("output_kb: 64", "output_kb: 16385", "limits.output_kb: must be at most 16384 KB, got 16385"),
    ],
    ids=["timeout-nan", "timeout-inf", "timeout-1e308", "timeout-too-small", "memory-over-1TB", "memory-400-digits", "memory-5000-digits", "output-over-16MB"],
)
def test_a_suite_limit_out_of_bounds_names_its_line(old: str, new: str, message: str) -> None:
    assert suite_error(suite_with(old, new)) == f"s.yaml:{line_of(old)}: {message}"


@pytest.mark.parametrize(
    ("old", "new", "field", "value"),
    [
        ("timeout: 10 ", "timeout: 3600 ", "timeout_s", 3600.0),
        ("timeout: 10 ", "timeout: 0.1 ", "timeout_s", 0.1),
        ("memory_mb: 1024", "memory_mb: 1048576", "memory_mb", 1048576),
        ("output_kb: 64", "output_kb: 16384", "output_bytes", 16384 * 1024),
    ],
)
def test_a_suite_limit_at_its_bound_is_accepted(old: str, new: str, field: str, value: float) -> None:
    assert getattr(parse_suite(suite_with(old, new), "s.yaml").limits, field) == value


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), 1e308, 3601])
def test_python_options_have_the_same_bounds(timeout: float) -> None:
    with pytest.raises(UsageError, match="options.timeout_s: must be"):
        grade(str(CORRECT), options=Options(timeout_s=timeout))


def test_python_options_within_the_bounds_grade() -> None:
    (report,) = grade(str(CORRECT), options=Options(timeout_s=3600, memory_mb=2048))
    assert report.passed


# --------------------------------------------------------------------------------------------
# 2. Tolerances: finite and at least 0


@pytest.mark.parametrize("key", ["rtol", "atol"])
@pytest.mark.parametrize(("value", "message"), [(".nan", "expected a finite number, got nan"), (".inf", "expected a finite number, got inf"), ("-1.0e-4", "must be at least 0.0, got -0.0001")])
def test_a_tolerance_that_is_not_a_finite_non_negative_number_is_refused(key: str, value: str, message: str) -> None:
    old = {"rtol": "rtol: 1.0e-4", "atol": "atol: 1.0e-6"}[key]
    assert suite_error(suite_with(old, f"{key}: {value}")) == f"s.yaml:{line_of(old)}: tolerance.{key}: {message}"


@pytest.mark.parametrize(("text", "rtol", "atol"), [("rtol: 0\n  atol: 0", 0.0, 0.0), ("rtol: 1.0e-3\n  atol: 1.0e-4", 1e-3, 1e-4)])
def test_a_finite_non_negative_tolerance_is_accepted(text: str, rtol: float, atol: float) -> None:
    suite = parse_suite(suite_with("rtol: 1.0e-4\n  atol: 1.0e-6", text), "s.yaml")
    assert (suite.tolerance.rtol, suite.tolerance.atol) == (rtol, atol)


def test_suite_check_refuses_a_nan_tolerance_and_accepts_a_finite_one(tmp_path: Path) -> None:
    bad, good = tmp_path / "bad.yaml", tmp_path / "good.yaml"
    bad.write_text(suite_with("rtol: 1.0e-4", "rtol: .nan"))
    good.write_text(suite_with("rtol: 1.0e-4", "rtol: 1.0e-3"))
    refused = CliRunner().invoke(cli, ["suite", "check", str(bad)])
    assert refused.exit_code == 2
    assert refused.stderr == f"grade: error: {bad}:{line_of('rtol: 1.0e-4')}: tolerance.rtol: expected a finite number, got nan\n"
    accepted = CliRunner().invoke(cli, ["suite", "check", str(good)])
    assert accepted.exit_code == 0 and "valid suite" in accepted.stdout


# --------------------------------------------------------------------------------------------
# 3. The function's name: what `def` accepts, and not one of Python's special names


BAD_NAMES = ["not an ident", "class", "", "a.b", "__import__"]


@pytest.mark.parametrize("name", BAD_NAMES, ids=["spaces", "keyword", "empty", "dotted", "dunder"])
def test_a_function_option_that_is_no_function_name_is_refused(name: str) -> None:
    result = CliRunner().invoke(cli, ["--function", name, str(CORRECT)])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith(f"grade: error: Invalid value for '--function': {name!r} ") and result.stderr.count("\n") == 1


def test_a_function_option_that_is_a_name_grades_that_function(tmp_path: Path) -> None:
    renamed = tmp_path / "renamed.py"
    renamed.write_text(CORRECT.read_text().replace("def attention(", "def my_attention("))
    result = CliRunner().invoke(cli, ["--no-cache", "-q", "--function", "my_attention", str(renamed)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("name", ["not an ident", "class", "a.b", "__import__"])
def test_a_suite_function_that_is_no_function_name_is_refused(name: str) -> None:
    message = suite_error(suite_with("function: attention", f"function: {json.dumps(name)}"))
    assert message.startswith(f"s.yaml:{line_of('function: attention')}: function: {name!r} ")


@pytest.mark.parametrize("name", ["class", "__import__", "a b"])
def test_an_entry_s_function_that_is_no_function_name_is_refused(name: str) -> None:
    message = suite_error(suite_with("function: attention", f"entry: {json.dumps('src/a.py:' + name)}"))
    assert message.startswith(f"s.yaml:{line_of('function: attention')}: entry: {name!r} ")


@pytest.mark.parametrize("name", ["my_attention", "_attention", "match"])
def test_a_function_name_def_accepts_is_accepted(name: str) -> None:
    assert parse_suite(suite_with("function: attention", f"function: {name}"), "s.yaml").function == name
    entry = parse_suite(suite_with("function: attention", f"entry: src/a.py:{name}"), "s.yaml").entry
    assert entry is not None and entry.function == name


def test_python_options_refuse_a_dunder_function() -> None:
    with pytest.raises(UsageError, match="options.function: '__import__' is one of Python's special names"):
        grade(str(CORRECT), options=Options(function="__import__"))


# --------------------------------------------------------------------------------------------
# 4. References: a file that is no .npy array, a manifest that is no manifest, said in words


def reference_folder(folder: Path, replace: dict[str, bytes] | None = None, manifest: str | None = None) -> Path:
    """The default suite's references in ``folder``, some files replaced with their checksums
    fixed in the manifest (so the content itself is what is judged), or the manifest replaced."""
    files = build_files(load_default_suite())
    table = json.loads(files["manifest.json"])
    for name, data in (replace or {}).items():
        files[name] = data
        table["files"][name] = hashlib.sha256(data).hexdigest()
    files["manifest.json"] = manifest.encode() if manifest is not None else json.dumps(table).encode()
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


def object_npy() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"\x00garbage, not numpy at all\xff" * 8, "it does not begin as a .npy file does (the grader never loads pickled data)"),
        (pickle.dumps([1.0, 2.0]), "it does not begin as a .npy file does (the grader never loads pickled data)"),
        (object_npy(), "it holds Python objects, which the grader never unpickles"),
        (b"\x93NUMPY\x01\x00\x10\x00{'descr': oops}   \n", "its .npy header is unreadable"),
    ],
    ids=["garbage", "pickle", "object-array", "bad-header"],
)
def test_a_reference_that_is_not_a_npy_array_of_numbers_is_refused_in_words(tmp_path: Path, data: bytes, words: str) -> None:
    folder = reference_folder(tmp_path / "ref", {"single.Q.npy": data})
    with pytest.raises(ReferenceDataError) as info:
        load_references(load_default_suite(), folder)
    message = str(info.value)
    assert message.startswith(f"{folder / 'single.Q.npy'}: not a .npy array of numbers: {words}; regenerate them with:"), message
    assert "allow_pickle" not in message and "unsafe" not in message


def test_a_truncated_reference_is_refused_and_an_intact_one_loads(tmp_path: Path) -> None:
    intact = build_files(load_default_suite())["single.Q.npy"]
    folder = reference_folder(tmp_path / "short", {"single.Q.npy": intact[:-8]})
    with pytest.raises(ReferenceDataError, match=r"not a .npy array of numbers: 88 bytes of data, expected 96 for shape \(3, 4\)"):
        load_references(load_default_suite(), folder)
    refs = load_references(load_default_suite(), reference_folder(tmp_path / "intact"))
    assert refs.cases["single"].Q.shape == (3, 4) and refs.cases["single"].Q.flags.writeable


@pytest.mark.parametrize(
    ("manifest", "words"),
    [
        ("[1, 2]", "not a JSON object but a list"),
        ("{not json", "not JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
        ('{"cases": {}}', "the field 'files' is missing"),
        ('{"files": {}, "cases": []}', "the field 'cases' is not an object of case names to digests"),
    ],
    ids=["list", "broken", "no-files", "cases-a-list"],
)
def test_a_manifest_that_is_no_manifest_says_what_is_wrong(tmp_path: Path, manifest: str, words: str) -> None:
    folder = reference_folder(tmp_path / "ref", manifest=manifest)
    with pytest.raises(ReferenceDataError) as info:
        load_references(load_default_suite(), folder)
    assert str(info.value).startswith(f"{folder / 'manifest.json'}: unreadable reference manifest: {words}; regenerate them with:"), str(info.value)
    assert "Error)" not in str(info.value)  # no exception class names


# --------------------------------------------------------------------------------------------
# 5. Numbers YAML 1.1 reads as strings (1e308, 1e-4): read as the numbers they say


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("timeout: 10 ", "timeout: 1e308 ", "limits.timeout: must be at most 3600 s, got 1e+308"),
        ("timeout: 10 ", "timeout: 1e999 ", "limits.timeout: expected a finite number, got inf"),
        ("timeout: 10 ", "timeout: ten ", "limits.timeout: expected a number, got a string 'ten'"),
        ("rtol: 1.0e-4", "rtol: 1e-", "tolerance.rtol: expected a number, got a string '1e-'"),
    ],
)
def test_a_number_written_without_a_dot_is_judged_as_a_number(old: str, new: str, message: str) -> None:
    assert suite_error(suite_with(old, new)) == f"s.yaml:{line_of(old)}: {message}"


def test_a_sensible_number_written_without_a_dot_is_accepted() -> None:
    suite = parse_suite(suite_with("rtol: 1.0e-4\n  atol: 1.0e-6", "rtol: 1e-3\n  atol: 1E-5"), "s.yaml")
    assert (suite.tolerance.rtol, suite.tolerance.atol) == (1e-3, 1e-5)
    assert parse_suite(suite_with("timeout: 10 ", "timeout: 2e1 "), "s.yaml").limits.timeout_s == 20.0
