"""The grader's own bad input, through the `grade` command: one line that says what and where,
the documented exit code, no traceback. A bad *submission* file is no error of the grader's: it is
graded, and fails its load check.

Also in test_cli.py: a missing path, bad options, a corrupt or missing reference file; in
test_batch.py: an unwritable output path and a full disk while writing a report.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import EXAMPLES
from grader.cli import cli


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def assert_one_line_error(code: int, out: str, err: str, fragment: str) -> None:
    assert code == 2, (code, err)
    assert out == ""
    assert err.startswith("grade: error: ") and err.count("\n") == 1, err
    assert fragment in err
    assert "Traceback" not in err


def test_symbolic_link_loop(tmp_path: Path) -> None:
    loop = tmp_path / "loop.py"
    loop.symlink_to(loop)
    assert_one_line_error(*invoke(str(loop)), f"{loop}: Too many levels of symbolic links")


def test_broken_symbolic_link(tmp_path: Path) -> None:
    link = tmp_path / "link.py"
    link.symlink_to(tmp_path / "gone.py")
    assert_one_line_error(*invoke(str(link)), f"{link}: broken symbolic link")


def test_folder_with_no_submissions(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("no Python here")
    (tmp_path / ".hidden").mkdir()
    message = f"{tmp_path}: no submissions in this folder (no .py file, no candidate folder)"
    assert_one_line_error(*invoke(str(tmp_path)), message)


def test_a_bad_path_stops_the_run_before_any_submission_runs(tmp_path: Path) -> None:
    code, out, err = invoke(str(EXAMPLES / "correct.py"), str(tmp_path / "missing.py"))
    assert_one_line_error(code, out, err, "missing.py: no such file or folder")


def test_invalid_suite_names_the_line_and_key(tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text("version: 1\nname: x\ncases: {a: {seed: 1, shape: {tq: 2, tk: 3, dk: 4, dv: 5}}}\nchecks: [{id: load}]\nlimits:\n  timout: 3\n")
    assert_one_line_error(*invoke("--suite", str(suite), str(EXAMPLES / "correct.py")), f"{suite}:6: limits.timout: unknown key 'timout'")


def test_binary_suite_file(tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_bytes(b"\xff\xfe\x00\x01binary")
    assert_one_line_error(*invoke("--suite", str(suite), str(EXAMPLES / "correct.py")), "not UTF-8")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"def attention(Q, K, V):\n    return Q\x00\x01\xff\xfe\n", "null bytes"),
        (b'NAME = "caf\xe9"\ndef attention(Q, K, V):\n    return Q\n', "can't decode byte 0xe9"),
        (bytes(range(256)) * 8, "SyntaxError"),
    ],
    ids=["nul-bytes", "latin-1", "random-bytes"],
)
def test_binary_or_non_utf8_submission_is_a_load_error(tmp_path: Path, content: bytes, fragment: str) -> None:
    path = tmp_path / "submission.py"
    path.write_bytes(content)
    code, out, err = invoke("--format", "json", str(path), str(EXAMPLES / "correct.py"))
    assert code == 1 and err == ""
    first, second = json.loads(out)["submissions"]
    assert [d["name"] for d in first["diagnoses"]] == ["load-error"]
    load = first["checks"][0]
    assert load["id"] == "load" and not load["passed"]
    assert fragment in load["summary"] and "\n" not in load["summary"]
    assert second["passed"]  # the run went on


def test_sandbox_info_exits_0_and_names_every_guarantee() -> None:
    code, out, err = invoke("--sandbox-info")
    assert code == 0 and err == ""
    for line in ("network isolation: ", "filesystem isolation: ", "process isolation: "):
        assert line in out
    doc = json.loads(invoke("--sandbox-info", "--format", "json")[1])
    assert set(doc["isolated"]) == {"network", "filesystem", "process"}
    assert {layer["name"] for layer in doc["layers"]} >= {"network-namespace", "landlock-fs", "pid-namespace"}


def test_strict_sandbox_refuses_with_one_line_when_a_guarantee_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.sandbox import isolation

    real = isolation.probe_layers

    def without_network(timeout_s: float = 15.0) -> list[isolation.Layer]:
        return [isolation.Layer(layer.name, False, "refused by the test") if layer.name == "network-namespace" else layer for layer in real(timeout_s)]

    monkeypatch.setattr(isolation, "probe_layers", without_network)
    code, out, err = invoke("--strict-sandbox", str(EXAMPLES / "correct.py"))
    assert_one_line_error(code, out, err, "--strict-sandbox: no network")
    assert "isolation here: network (network-namespace: refused by the test)" in err
