"""The example submissions grade exactly as labelled: verdict and error-level diagnoses."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, error_names, warning_names

LABELS = yaml.safe_load((EXAMPLES / "labels.yaml").read_text())
SLOW = {"timeout.py"}  # needs the wall-clock limit to pass: graded with a short limit below


def _param(name: str):  # type: ignore[no-untyped-def]
    # Examples with `requires` (torch, jax) are marked `framework` and skip where it is missing.
    return pytest.param(name, id=name, marks=[pytest.mark.framework] if LABELS[name].get("requires") else [])


@pytest.mark.parametrize("name", [_param(n) for n in sorted(set(LABELS) - SLOW)])
def test_example_is_graded_as_labelled(name: str, grade_path) -> None:  # type: ignore[no-untyped-def]
    framework = LABELS[name].get("requires")
    if framework and importlib.util.find_spec(framework) is None:
        if os.environ.get("GRADER_REQUIRE_FRAMEWORKS") == "1":
            pytest.fail(f"{framework} is not installed but GRADER_REQUIRE_FRAMEWORKS=1")
        pytest.skip(f"{framework} is not installed")
    report = grade_path(EXAMPLES / name)
    assert report.passed is LABELS[name]["passed"]
    assert error_names(report) == sorted(LABELS[name]["diagnoses"])
    if "warnings" in LABELS[name]:
        assert warning_names(report) == sorted(LABELS[name]["warnings"])


def test_timeout_example_is_stopped(prepared) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    from grader.api import grade_file

    quick = replace(prepared, limits=replace(prepared.limits, timeout_s=1.5))
    report = grade_file(EXAMPLES / "timeout.py", quick)
    assert error_names(report) == ["timeout"]
    assert report.duration_s < 5
    assert not report.passed


def test_every_example_file_has_a_label() -> None:
    files = {p.name for p in Path(EXAMPLES).glob("*.py")}
    assert files == set(LABELS)


def test_seed_submission_names_both_bugs_with_figures(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "seed_buggy.py")
    scale = next(d for d in report.diagnoses if d.name == "scale-by-dk")
    assert scale.evidence["fitted_scale"] == pytest.approx(1 / 64, rel=0.01)
    assert scale.evidence["expected_scale"] == pytest.approx(1 / 8)
    assert scale.evidence["mean_max_weight"] < scale.evidence["reference_mean_max_weight"]  # flatter rows
    transpose = next(d for d in report.diagnoses if d.name == "batch-transpose")
    assert transpose.evidence["exception"] == "ValueError"
    assert "silent_on" in transpose.evidence  # the B = T = d batch ran and mixed elements


def test_no_scale_rows_are_more_peaked(grade_path) -> None:  # type: ignore[no-untyped-def]
    d = grade_path(EXAMPLES / "no_scale.py").diagnoses[0]
    assert d.evidence["fitted_scale"] == pytest.approx(1.0, rel=0.01)
    assert d.evidence["mean_max_weight"] > d.evidence["reference_mean_max_weight"]


def test_value_checks_are_skipped_after_a_wrong_shape(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "bad_return.py")
    outcomes = {c.id: c.outcome for c in report.checks}
    assert outcomes["shape"] == "failed"
    assert outcomes["weights"] == outcomes["outputs"] == "skipped"


def test_load_failure_skips_everything_else(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "load_error.py")
    assert [c.outcome for c in report.checks] == ["failed"] + ["skipped"] * (len(report.checks) - 1)
    assert report.score == 0
