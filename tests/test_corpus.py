"""The wider corpus: correct styles must stay clean, known bugs must be named exactly."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from conftest import CORPUS, assert_verdict, error_names, needs_framework

EXPECTED: dict[str, dict] = yaml.safe_load((CORPUS / "expected.yaml").read_text())
SLOW = {"buggy/timeout.py"}  # needs the wall-clock limit: graded with a short one below


def _param(path: str, want: dict):  # type: ignore[no-untyped-def, type-arg]
    # Entries with `requires` (torch, jax) are marked `framework` and skip where it is missing.
    marks = [pytest.mark.framework] if want.get("requires") else []
    return pytest.param(path, want, id=path, marks=marks)


@pytest.mark.parametrize(("path", "want"), [_param(p, w) for p, w in sorted(EXPECTED.items()) if p not in SLOW])
def test_corpus_submission(path: str, want: dict, grade_path) -> None:  # type: ignore[no-untyped-def]
    needs_framework(want.get("requires"))
    report = grade_path(CORPUS / path)
    assert_verdict(report, want)
    if "framework" in want:  # the arrays it was handed, where the imports alone would mislead
        assert report.extra["framework"] == want["framework"]


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


def test_a_crash_fix_names_the_ranks_it_runs_on_and_no_stored_shape(grade_path) -> None:  # type: ignore[no-untyped-def]
    """The fix is what the default terminal view and a candidate see of a crash: it says which
    ranks raise and which run, never a stored case's shape."""
    report = grade_path(CORPUS / "buggy" / "rank-3d-only-scale-by-dk.py")
    crash = next(d for d in report.diagnoses if d.name == "crash")
    assert crash.fix.startswith("It runs on 3-D input only and raises ") and "on 2-D and 4-D" in crash.fix
    assert "(" + str(crash.evidence["input_shape"]).split("(")[1].split(")")[0] + ")" not in crash.fix
    every_rank = grade_path(CORPUS / "buggy" / "crash.py")
    (only,) = [d for d in every_rank.diagnoses if d.name == "crash"]
    assert only.fix.startswith("It raises ValueError on every input it was given (2-D, 3-D and 4-D)")


def test_the_heat_map_goes_under_the_mistake_in_the_math_not_the_crash(grade_path) -> None:  # type: ignore[no-untyped-def]
    from grader.report.text import _heat_owner

    report = grade_path(CORPUS / "buggy" / "rank-3d-only-scale-by-dk.py")
    owner, heatmap = _heat_owner(report)
    assert heatmap is not None and owner is not None and owner.name == "scale-by-dk"


def test_a_load_error_of_a_missing_module_names_it_in_the_fix(grade_path) -> None:  # type: ignore[no-untyped-def]
    (d,) = grade_path(CORPUS / "buggy" / "load-error-import.py").diagnoses
    assert d.name == "load-error" and d.evidence["module"] == "my_softmax_utils"
    assert "`my_softmax_utils`" in d.fix and "submit it if it is yours" in d.fix
    (other,) = grade_path(CORPUS / "buggy" / "load-error.py").diagnoses
    assert "module" not in other.evidence and "imports `" not in other.fix


def test_a_crash_on_some_sizes_of_a_rank_blames_a_written_size_not_the_rank(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(CORPUS / "buggy" / "crash-fixed-feature-size.py")
    (crash,) = [d for d in report.diagnoses if d.name == "crash"]
    assert "some inputs and runs on others of the same rank" in crash.fix and "D input only" not in crash.fix
