"""The Python API as the README shows it: `from grader import grade`, a path as str or Path (or a
list of them), and the grader's own errors for bad input, raised when grade is called, never a
TypeError or AttributeError from inside."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES, ROOT
from grader.errors import GraderError, ReferenceDataError, SuiteError, UsageError

README = (ROOT / "README.md").read_text()


def test_import_grader_stays_light() -> None:
    """The worker imports the package too: `import grader` pulls in neither numpy nor the pipeline."""
    code = "import sys, grader; print(sorted(m for m in sys.modules if m == 'numpy' or m.startswith('grader.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"


def test_grade_a_str_a_path_and_a_list() -> None:
    from grader import Options, grade

    (buggy,) = grade(str(EXAMPLES / "seed_buggy.py"))
    assert not buggy.passed and [d.name for d in buggy.diagnoses] == ["scale-by-dk", "batch-transpose"]
    (right,) = grade(EXAMPLES / "correct.py", options=Options(timeout_s=20))
    assert right.passed and right.score == right.max_score
    both = list(grade([EXAMPLES / "correct.py", str(EXAMPLES / "no_scale.py")]))
    assert [Path(r.path).name for r in both] == ["correct.py", "no_scale.py"]  # in the order given


def test_grade_with_a_suite_file_and_a_checkout(tmp_path: Path) -> None:
    from grader import grade

    checkout = tmp_path / "candidate"
    checkout.mkdir()
    (checkout / "attention.py").write_text((EXAMPLES / "correct.py").read_text())
    (report,) = grade(checkout, suite=ROOT / "grader" / "fixtures" / "suite.yaml", candidate=True)
    assert report.passed


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda g, O: g(123), UsageError, "paths: expected a path (str or pathlib.Path) or a list of them, got int"),
        (lambda g, O: g(None), UsageError, "got NoneType"),
        (lambda g, O: g(b"sub.py"), UsageError, "got bytes"),
        (lambda g, O: g([]), UsageError, "no submission given"),
        (lambda g, O: g([1, 2]), UsageError, "items, got int"),
        (lambda g, O: g(["missing.py"]), UsageError, "missing.py: no such file or folder"),
        (lambda g, O: g("x.py", suite="not a suite"), SuiteError, "not a suite: suite file not found"),
        (lambda g, O: g("x.py", suite=42), UsageError, "suite: expected a Suite or the path of a suite file, got int"),
        (lambda g, O: g("x.py", options={"timeout_s": 5}), UsageError, "options: expected grader.Options, got dict"),
        (lambda g, O: g("x.py", options=O(timeout_s="fast")), UsageError, "options.timeout_s"),
        (lambda g, O: g("x.py", options=O(timeout_s=0)), UsageError, "at least 0.1"),
        (lambda g, O: g("x.py", options=O(memory_mb=1.5)), UsageError, "options.memory_mb"),
        (lambda g, O: g("x.py", options=O(function="my attention")), UsageError, "options.function"),
        (lambda g, O: g("x.py", options=O(framework="tensorflow")), UsageError, "options.framework: expected one of auto, numpy, torch, jax"),
        (lambda g, O: g("x.py", options=O(strict_sandbox="yes")), UsageError, "options.strict_sandbox"),
        (lambda g, O: g("x.py", candidate="yes"), UsageError, "candidate: expected True or False"),
    ],
)
def test_bad_input_raises_the_documented_errors_at_the_call(call, error, words) -> None:  # type: ignore[no-untyped-def]
    from grader import Options, grade

    with pytest.raises(error, match=re.escape(words)) as caught:
        call(grade, Options)  # not iterated: the error comes from the call itself
    assert isinstance(caught.value, GraderError)


def test_suite_without_references_is_a_reference_error(tmp_path: Path) -> None:
    from grader import grade
    from grader.starter import write_starter

    suite = tmp_path / "task.yaml"
    write_starter(suite)
    with pytest.raises(ReferenceDataError, match=re.escape(f"grade references --regenerate --suite {suite}")):
        grade(EXAMPLES / "correct.py", suite=str(suite))


def test_the_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = README.split("## Python API", 1)[1].split("\n## ", 1)[0]
    (example,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert re.search(r"^from grader import .*\bgrade\b", example, flags=re.M)
    monkeypatch.chdir(ROOT)
    exec(compile(example, "README.md", "exec"), {})  # noqa: S102 - our own README's example
