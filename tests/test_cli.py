"""The command line: exit codes, one-line errors, the JSON schema, explanations."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import EXAMPLES, ROOT
from grader.cli import cli
from grader.diagnosis.registry import RULES


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_correct_submission_exits_0() -> None:
    code, out, _ = invoke(str(EXAMPLES / "correct.py"))
    assert code == 0
    assert "PASSED" in out


def test_failing_submission_exits_1_and_names_the_bug() -> None:
    code, out, _ = invoke(str(EXAMPLES / "seed_buggy.py"))
    assert code == 1
    assert "scale-by-dk" in out and "batch-transpose" in out
    assert "fix " in out and "Why" not in out  # the why-texts come with -v
    code, out, _ = invoke("-v", str(EXAMPLES / "seed_buggy.py"))
    assert code == 1 and "Why" in out and "Fix" in out


def test_missing_path_is_one_line_exit_2() -> None:
    code, out, err = invoke("no/such/submission.py")
    assert code == 2
    assert err == "grade: error: no/such/submission.py: no such file or folder\n"
    assert out == ""


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--timeout", "0"], "--timeout"),
        (["--format", "yaml"], "--format"),
        (["--no-such-option"], "--no-such-option"),
        ([], "no submission given"),
    ],
)
def test_usage_errors_are_one_line_exit_2(args: list[str], fragment: str) -> None:
    code, _, err = invoke(*args, str(EXAMPLES / "correct.py")) if args else invoke()
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("grade: error: ") and fragment in err
    assert "Traceback" not in err


def test_folder_and_non_python_paths_are_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    assert invoke(str(tmp_path / "notes.txt"))[0] == 2
    assert invoke(str(tmp_path))[0] == 2


def test_json_schema() -> None:
    code, out, _ = invoke("--format", "json", str(EXAMPLES / "seed_buggy.py"), str(EXAMPLES / "correct.py"))
    assert code == 1
    doc = json.loads(out)
    assert set(doc) >= {"submissions", "summary"}
    first, second = doc["submissions"]
    for sub in (first, second):
        assert set(sub) >= {"path", "passed", "score", "max_score", "checks", "diagnoses"}
        for check in sub["checks"]:
            assert set(check) >= {"id", "passed", "outcome", "points", "max_points", "summary"}
            assert check["outcome"] in ("passed", "failed", "skipped", "error")
    assert first["passed"] is False and second["passed"] is True
    names = [d["name"] for d in first["diagnoses"]]
    assert names == ["scale-by-dk", "batch-transpose"]
    for d in first["diagnoses"]:
        assert set(d) >= {"code", "name", "severity", "message", "evidence", "fix"}
        assert d["severity"] in ("error", "warning")
    assert doc["summary"]["total"] == 2 and doc["summary"]["passed"] == 1
    assert second["score"] == second["max_score"] == doc["suite"]["max_score"]


@pytest.mark.parametrize("key", [r.name for r in RULES] + [r.code for r in RULES])
def test_explain_every_rule(key: str) -> None:
    code, out, _ = invoke("--explain", key)
    assert code == 0
    for heading in ("What it checks", "Why it matters", "Example", "Use instead"):
        assert heading in out


def test_explain_unknown_is_exit_2() -> None:
    code, _, err = invoke("explain", "scale-by-pi")
    assert code == 2 and "unknown diagnosis 'scale-by-pi'" in err


def test_references_verify() -> None:
    code, out, _ = invoke("references", "--verify")
    assert code == 0 and "verified" in out


def _suite_with_refs(tmp_path: Path) -> Path:
    refs = tmp_path / "refs"
    shutil.copytree(ROOT / "grader" / "reference", refs, ignore=shutil.ignore_patterns("__init__.py", "__pycache__"))
    text = (ROOT / "grader" / "fixtures" / "suite.yaml").read_text()
    suite = tmp_path / "suite.yaml"
    suite.write_text(text + "\nreferences: refs\n")
    return suite


def test_corrupt_reference_is_refused_with_exit_2(tmp_path: Path) -> None:
    suite = _suite_with_refs(tmp_path)
    target = tmp_path / "refs" / "head64.weights.npy"
    data = bytearray(target.read_bytes())
    data[-1] ^= 0x01  # one flipped bit in the last stored weight
    target.write_bytes(bytes(data))
    code, out, err = invoke("--suite", str(suite), str(EXAMPLES / "correct.py"))
    assert code == 2 and out == ""
    assert err.startswith("grade: error: ") and "head64.weights.npy: checksum mismatch" in err
    assert err.count("\n") == 1


def test_missing_reference_is_refused_with_exit_2(tmp_path: Path) -> None:
    suite = _suite_with_refs(tmp_path)
    (tmp_path / "refs" / "batch.V.npy").unlink()
    code, _, err = invoke("--suite", str(suite), str(EXAMPLES / "correct.py"))
    assert code == 2 and "batch.V.npy: reference file missing" in err


def test_function_option_grades_another_name() -> None:
    code, _, _ = invoke("--function", "self_attention", str(EXAMPLES / "function_missing.py"))
    assert code == 0


def test_numpy_says_nothing_on_stderr_about_a_candidate_s_values(tmp_path: Path) -> None:
    """Judging 1e308s, all-NaN rows and complex results is deliberate: stderr carries the
    grader's own lines only, not numpy's overflow, all-NaN or complex-cast remarks."""
    bodies = {
        "huge.py": "np.full(Q.shape[:-1] + V.shape[-1:], 1.7e308)",
        "nan_rows.py": "np.full(Q.shape[:-1] + V.shape[-1:], np.nan)",
        "rotated.py": "-1j * (np.exp(Q @ np.swapaxes(K, -1, -2)) @ V)",
    }
    for name, body in bodies.items():
        (tmp_path / name).write_text(f"import numpy as np\n\n\ndef attention(Q, K, V):\n    return {body}\n")
    # A process of its own: under pytest, warnings are caught by pytest instead of printed.
    done = subprocess.run([sys.executable, "-m", "grader", "--no-cache", "-q", *(str(tmp_path / name) for name in bodies)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Warning" not in done.stderr, done.stderr
