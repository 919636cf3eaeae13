"""The wider corpus: correct styles must stay clean, known bugs must be named exactly."""

from __future__ import annotations

import pytest
import yaml

from conftest import CORPUS, error_names
from grader.diagnosis.registry import BY_NAME

EXPECTED: dict[str, dict] = yaml.safe_load((CORPUS / "expected.yaml").read_text())
SLOW = {"buggy/timeout.py"}
# Mistakes whose catalogue entry is not written yet; each entry leaves this list with its rule.
PENDING = {"buggy/batch-transpose-dot.py": "np.dot on a batch is not in the catalogue yet"}


def _cases() -> list:  # type: ignore[type-arg]
    cases = []
    for path, want in sorted(EXPECTED.items()):
        if path in SLOW:
            continue
        marks = []
        unknown = [n for n in want["diagnoses"] if n not in BY_NAME]
        if path in PENDING:
            marks.append(pytest.mark.skip(reason=PENDING[path]))
        elif unknown:
            marks.append(pytest.mark.skip(reason=f"diagnosis not in the registry yet: {', '.join(unknown)}"))
        cases.append(pytest.param(path, want, id=path, marks=marks))
    return cases


@pytest.mark.parametrize(("path", "want"), _cases())
def test_corpus_submission(path: str, want: dict, grade_path) -> None:  # type: ignore[no-untyped-def, type-arg]
    report = grade_path(CORPUS / path)
    if want["passed"]:
        assert report.passed, [d.message for d in report.diagnoses]
        assert error_names(report) == []
    else:
        assert not report.passed
        assert error_names(report) == sorted(want["diagnoses"]) or not want["diagnoses"]
