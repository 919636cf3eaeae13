"""--feedback DIR: one Markdown file per submission, for its candidate, named after the candidate
(safely, never overwriting another of the same run), the candidate's view unless the reviewer's
is asked for by name; a folder that cannot be written is one line and exit 2, before grading."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import EXAMPLES
from grader.cli import cli
from grader.report.feedback import FeedbackWriter, safe_name

NAMES = ("seed_buggy.py", "correct.py", "load_error.py")


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"GITHUB_ACTIONS": None, "CI": "true"})  # type: ignore[dict-item]
    return result.exit_code, result.stdout, result.stderr


def feedback(folder: Path, *args: str, paths: tuple[str, ...] = ()) -> dict[str, str]:
    code, _, err = invoke("-q", "--feedback", str(folder), *args, *(paths or tuple(str(EXAMPLES / n) for n in NAMES)))
    assert code == 1, err
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.iterdir())}


def test_one_file_per_submission_in_the_candidates_view(tmp_path: Path) -> None:
    files = feedback(tmp_path / "made" / "if-missing")
    assert sorted(files) == ["correct.md", "load_error.md", "seed_buggy.md"]  # no temporary file left
    buggy = files["seed_buggy.md"]
    assert buggy.startswith("# Feedback for seed\\_buggy\n")
    assert re.search(r"^\*\*Failed:\*\* \d+ of \d+ points\.$", buggy, re.M)
    # most important first: the bugs in words, with their line and fix, before the checks
    assert buggy.index("### 1. Scores divided by d_k instead of sqrt(d_k)") < buggy.index("### 2. Batched keys") < buggy.index("## Checks")
    assert "line 12: `scores = Q @ K.T / Q.shape[-1]`" in buggy
    assert "- **Fix:** `scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)`" in buggy
    # the candidate's view: nothing measured against the reference, no expected value
    assert "Measured" not in buggy and "max abs diff" not in buggy and "expected" not in buggy
    assert re.search(r"^\*\*Passed:\*\* (\d+) of \1 points\.$", files["correct.md"], re.M) and "nothing to fix" in files["correct.md"]
    assert "fails to import" in files["load_error.md"]


def test_reviewer_view_only_when_asked_by_name(tmp_path: Path) -> None:
    reviewer = feedback(tmp_path / "r", "--audience", "reviewer")["seed_buggy.md"]
    assert "- **Measured:** effective scale" in reviewer and "max abs diff" in reviewer
    candidate = feedback(tmp_path / "c", "--audience", "candidate")["seed_buggy.md"]
    assert candidate == feedback(tmp_path / "d")["seed_buggy.md"]


def test_same_names_get_suffixes_and_names_are_safe(tmp_path: Path) -> None:
    batch = tmp_path / "batch"
    (batch / "alice").mkdir(parents=True)
    shutil.copy(EXAMPLES / "correct.py", batch / "alice" / "attention.py")
    shutil.copy(EXAMPLES / "seed_buggy.py", batch / "alice.py")  # the same candidate name
    hostile = batch / "[x](evil.example) @team <img src=x>\x1b[31m"
    hostile.mkdir()
    shutil.copy(EXAMPLES / "seed_buggy.py", hostile / "attention.py")
    files = feedback(tmp_path / "out", paths=(str(batch),))
    assert len(files) == 3
    assert {"alice.md", "alice-2.md"} <= set(files)
    assert "**Passed:**" in files["alice.md"] + files["alice-2.md"] and "**Failed:**" in files["alice.md"] + files["alice-2.md"]
    (odd,) = set(files) - {"alice.md", "alice-2.md"}
    assert odd == "_x__evil.example_ @team _img src_x__x1b_31m.md"
    text = files[odd]
    # no link, no mention, no HTML, no control character: every piece escaped
    assert text.splitlines()[0] == "# Feedback for \\[x\\]\\(evil.example\\) @&#8203;team \\<img src=x\\>\\\\x1b\\[31m"
    assert "\x1b" not in text


def test_file_names_and_collisions() -> None:
    assert safe_name("../../etc/passwd") == "_.._etc_passwd"
    assert safe_name(".hidden") == "hidden"
    assert safe_name("a\\b\x00c\nd") == "a_b_x00c_nd"
    assert safe_name("José Ñandú") == "José Ñandú"
    assert safe_name("...") == safe_name("") == "submission"
    assert len(safe_name("x" * 500)) == 100
    writer = FeedbackWriter(Path("."))
    assert [writer.name_for(n) for n in ("a/b", "a_b", "Alice", "alice", "a_b-2", "a_b")] == [
        "a_b.md", "a_b-2.md", "Alice.md", "alice-2.md", "a_b-2-2.md", "a_b-3.md",
    ]


@pytest.mark.parametrize("where", ["a-file", "a-file/below"])
def test_unwritable_folder_is_one_line_exit_2_before_grading(tmp_path: Path, where: str) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    folder = tmp_path / where
    code, out, err = invoke("--feedback", str(folder), str(EXAMPLES / "correct.py"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"grade: error: --feedback {folder}: "), err
