"""The wider corpus: correct styles must stay clean, known bugs must be named exactly."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from conftest import CORPUS, error_names, warning_names

EXPECTED: dict[str, dict] = yaml.safe_load((CORPUS / "expected.yaml").read_text())
SLOW = {"buggy/timeout.py"}  # needs the wall-clock limit: graded with a short one below


@pytest.mark.parametrize(("path", "want"), [pytest.param(p, w, id=p) for p, w in sorted(EXPECTED.items()) if p not in SLOW])
def test_corpus_submission(path: str, want: dict, grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(CORPUS / path)
    assert report.passed is want["passed"], [d.message for d in report.diagnoses]
    assert error_names(report) == sorted(want["diagnoses"]), [d.message for d in report.diagnoses]
    if "warnings" in want:
        assert warning_names(report) == sorted(want["warnings"])


def test_corpus_timeout_is_stopped(prepared) -> None:  # type: ignore[no-untyped-def]
    from grader.api import grade_file

    quick = replace(prepared, limits=replace(prepared.limits, timeout_s=1.5))
    report = grade_file(CORPUS / "buggy/timeout.py", quick)
    assert error_names(report) == sorted(EXPECTED["buggy/timeout.py"]["diagnoses"])
    assert report.duration_s < 10


def test_every_corpus_file_is_listed() -> None:
    # The folders of this table; forms/, masks/, take_home_2d/ ... have expected.yaml tables of
    # their own (tests/test_forms.py).
    folders = {key.split("/")[0] for key in EXPECTED}
    files = {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.py") if p.relative_to(CORPUS).parts[0] in folders}
    helpers = {"correct/with_helper/softmax_helper.py"}
    assert files - helpers == set(EXPECTED)
